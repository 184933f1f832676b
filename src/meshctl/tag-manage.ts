// `meshctl tag set`, `tag list` and `tag remove` (istioctl 1.26 istioctl/pkg/tag/tag.go and util.go): set applies
// what `tag generate` prints (server-side apply, field manager `meshctl`); list reads the revision webhooks and the
// namespaces that point at each tag; remove deletes the tag's webhooks (after a confirmation while namespaces still
// use it, unless -y). Differs on purpose: namespaces labelled with Istio's `istio.io/rev=<tag>` count as the tag's
// too; remove also deletes the tag's Service and the default tag's validator, which `set` creates (as Istio's later
// releases do); istioctl's webhook-conflict analysis before `set` is not run.
import { CommandError, flagBool, flagString, type Handler } from '../cli/context';
import type { OrchClient } from '../config/orch/client';
import { jsonToGoYaml } from '../lib/goyaml';
import { TabWriter } from '../lib/tabwriter';
import { confirm } from './confirm';
import { apiStatus, withOrch } from './orch';
import { ISTIO_REV, list, MWC, REV, TAG, tagArgument, tagObjects, VALIDATOR, type Obj } from './tag';

const FIELD_MANAGER = 'meshctl';

function objectUrl(o: Obj): string {
  const name = encodeURIComponent(o.metadata.name);
  switch (o.kind) {
    case 'MutatingWebhookConfiguration':
      return `${MWC}/${name}`;
    case 'ValidatingWebhookConfiguration':
      return `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${name}`;
    case 'Service':
      return `/api/v1/namespaces/${encodeURIComponent(o.metadata.namespace)}/services/${name}`;
    default:
      throw new Error(`unexpected tag object kind ${o.kind}`);
  }
}

/** What `orchctl apply` would send: no null creationTimestamp, no status. */
function forApply(o: Obj): Obj {
  const { status: _status, ...rest } = o;
  const { creationTimestamp: _created, ...metadata } = o.metadata;
  return { ...rest, metadata };
}

export const set: Handler = async (ctx) => {
  const tag = tagArgument(ctx);
  const revision = flagString(ctx, 'revision');
  await withOrch(ctx, 'tag set', async (client) => {
    const objects = await tagObjects(ctx, client, tag, true);
    for (const o of objects) {
      try {
        await client.request('PATCH', objectUrl(o), {
          body: forApply(o),
          contentType: 'application/apply-patch+yaml',
          query: { fieldManager: FIELD_MANAGER, force: 'true' },
        });
      } catch (e) {
        if (apiStatus(e) === undefined) throw e;
        throw new CommandError(`failed to apply tag webhook MutatingWebhookConfiguration to cluster: ${(e as Error).message}`);
      }
    }
  });
  ctx.stdout.write(
    `Revision tag "${tag}" created, referencing control plane revision "${revision}". To enable injection using this\n` +
      `revision tag, use 'orchctl label namespace <NAMESPACE> ${REV}=${tag}'\n`,
  );
  return 0;
};

/** Namespaces whose revision label (ours or Istio's) names `tag`, sorted, each once. */
async function namespacesWithTag(client: OrchClient, tag: string): Promise<string[]> {
  const names = new Set<string>();
  for (const key of [REV, ISTIO_REV]) {
    for (const ns of await list(client, '/api/v1/namespaces', `${key}=${tag}`)) names.add(ns.metadata.name);
  }
  return [...names].sort();
}

export interface TagDescription {
  tag: string;
  revision: string;
  namespaces: string[];
}

/** istioctl's listTags: a revision's own webhook is listed (with an empty tag) only while no tag points at it. */
export function describeTags(webhooks: Obj[], namespaces: (tag: string) => string[]): TagDescription[] {
  const byKey = new Map<string, TagDescription>();
  for (const wh of webhooks) {
    const labels = wh.metadata?.labels ?? {};
    const tag = labels[TAG] ?? '';
    const revision = labels[REV] ?? '';
    byKey.set(`${revision}\u0000${tag}`, { tag, revision, namespaces: namespaces(tag) });
  }
  for (const d of [...byKey.values()]) if (d.tag !== '') byKey.delete(`${d.revision}\u0000`);
  return [...byKey.values()].sort((a, b) =>
    a.revision < b.revision ? -1 : a.revision > b.revision ? 1 : a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0,
  );
}

/** The table, JSON (tab-indented, as Go's MarshalIndent) or YAML of the tags. */
export function formatTags(tags: TagDescription[], format: string): string {
  if (format === 'json') return JSON.stringify(tags, null, '\t') + '\n';
  if (format === 'yaml') return jsonToGoYaml(tags) + '\n';
  const w = new TabWriter(0, 1);
  w.row('TAG', 'REVISION', 'NAMESPACES');
  for (const t of tags) w.row(t.tag, t.revision, t.namespaces.join(','));
  return w.flush();
}

export const listTags: Handler = async (ctx) => {
  if (ctx.args.length !== 0) throw new CommandError('tag list command does not accept arguments');
  const format = flagString(ctx, 'output');
  if (!['table', 'json', 'yaml'].includes(format)) throw new CommandError(`unknown format: ${format}`);
  const text = await withOrch(ctx, 'tag list', async (client) => {
    let webhooks: Obj[];
    try {
      webhooks = await list(client, MWC, REV);
    } catch (e) {
      if (apiStatus(e) === undefined || apiStatus(e) === 401 || apiStatus(e) === 403) throw e;
      throw new CommandError(`failed to retrieve revision tags: ${(e as Error).message}`);
    }
    if (webhooks.length === 0) return 'No mesh revision tag MutatingWebhookConfigurations to list\n';
    const nsByTag = new Map<string, string[]>();
    for (const wh of webhooks) {
      const tag = wh.metadata?.labels?.[TAG] ?? '';
      if (!nsByTag.has(tag)) nsByTag.set(tag, tag === '' ? [] : await namespacesWithTag(client, tag));
    }
    return formatTags(
      describeTags(webhooks, (t) => nsByTag.get(t) ?? []),
      format,
    );
  });
  ctx.stdout.write(text);
  return 0;
};

export const remove: Handler = async (ctx) => {
  if (ctx.args.length === 0) throw new CommandError('must provide a tag for removal');
  if (ctx.args.length > 1) throw new CommandError('must provide a single tag for removal');
  const tag = ctx.args[0]!;
  const meshNamespace = flagString(ctx, 'meshNamespace') || 'mesh-system';
  return withOrch(ctx, 'tag remove', async (client) => {
    const webhooks = await list(client, MWC, `${TAG}=${tag}`);
    if (webhooks.length === 0) throw new CommandError(`cannot remove tag "${tag}": cannot find MutatingWebhookConfiguration for tag`);
    const namespaces = await namespacesWithTag(client, tag);
    if (namespaces.length > 0 && !flagBool(ctx, 'skip-confirmation')) {
      const prompt = `Caution, found ${namespaces.length} namespace(s) still injected by tag "${tag}": ${namespaces.join(' ')}\nProceed with operation? [y/N]`;
      if (!(await confirm(ctx, prompt))) {
        ctx.stdout.write('Aborting operation.\n');
        return 0;
      }
    }
    for (const wh of webhooks) {
      try {
        await client.request('DELETE', `${MWC}/${encodeURIComponent(wh.metadata.name)}`);
      } catch (e) {
        if (apiStatus(e) === 404) continue;
        if (apiStatus(e) === undefined) throw e;
        throw new CommandError(`failed to delete mesh revision tag MutatingConfigurationWebhook: ${(e as Error).message}`);
      }
    }
    const extras = [
      ...(await list(client, `/api/v1/namespaces/${encodeURIComponent(meshNamespace)}/services`, `${TAG}=${tag}`)),
      ...(tag === 'default' ? await list(client, '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', `${TAG}=${tag}`) : []),
    ];
    for (const o of extras) {
      const kind = o.metadata.namespace ? 'Service' : 'ValidatingWebhookConfiguration';
      if (kind === 'ValidatingWebhookConfiguration' && o.metadata.name !== VALIDATOR) continue;
      try {
        await client.request('DELETE', objectUrl({ ...o, kind }));
      } catch (e) {
        if (apiStatus(e) !== 404) throw e;
      }
    }
    ctx.stdout.write(`Revision tag ${tag} removed\n`);
    return 0;
  });
};
