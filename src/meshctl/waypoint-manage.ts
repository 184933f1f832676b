// `meshctl waypoint apply|list|status|delete` (istioctl 1.26 istioctl/pkg/waypoint/waypoint.go): the waypoint
// Gateway objects (class mesh-waypoint, or Istio's istio-waypoint) in the cluster. Differs on purpose: mesh has no
// ambient mode and no waypoint data plane, so nothing programs these Gateways; `apply --enroll-namespace` says so
// instead of istioctl's "namespace is not enrolled in ambient" hint, and `status`/`apply --wait` name that as the
// reason when they time out. `status` prints each waypoint's conditions once, when they are final or at the
// timeout, instead of istioctl's row per second of waiting.
import { CommandError, flagBool, flagNumber, flagString, type Handler, type RunContext } from '../cli/context';
import type { OrchClient } from '../config/orch/client';
import { formatDurationMs } from '../lib/duration';
import { TabWriter } from '../lib/tabwriter';
import { apiStatus, commandNamespace, withOrch } from './orch';
import { REV_LABEL, WAYPOINT_GATEWAY_CLASS, waypointGateway } from './waypoint';

type Obj = Record<string, any>;

/** The classes whose Gateways are waypoints: ours, and Istio's which mesh accepts beside it. */
export const WAYPOINT_CLASSES = [WAYPOINT_GATEWAY_CLASS, 'istio-waypoint'];
export const USE_WAYPOINT_LABEL = 'mesh.io/use-waypoint';
const GATEWAYS = 'gateway.networking.k8s.io/v1';
const POLL_MS = 1000;
export const NO_DATA_PLANE =
  'mesh has no waypoint data plane (no ambient mode): nothing in mesh programs Gateways of class mesh-waypoint, so their Programmed condition stays False';

function gatewaysPath(ns: string): string {
  return ns ? `/apis/${GATEWAYS}/namespaces/${encodeURIComponent(ns)}/gateways` : `/apis/${GATEWAYS}/gateways`;
}

function isWaypoint(gw: Obj): boolean {
  return WAYPOINT_CLASSES.includes(gw.spec?.gatewayClassName);
}

function byNamespaceThenName(a: Obj, b: Obj): number {
  const ka = `${a.metadata.namespace}\u0000${a.metadata.name}`;
  const kb = `${b.metadata.namespace}\u0000${b.metadata.name}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

function conditions(gw: Obj): Obj[] {
  return (gw.status?.conditions ?? []) as Obj[];
}

export function programmed(gw: Obj): boolean {
  return conditions(gw).some((c) => c.type === 'Programmed' && c.status === 'True');
}

async function listWaypoints(client: OrchClient, ns: string, labelSelector?: string): Promise<Obj[]> {
  const res = (await client.getJson(gatewaysPath(ns), labelSelector ? { labelSelector } : undefined)) as Obj;
  return ((res.items ?? []) as Obj[]).filter(isWaypoint).sort(byNamespaceThenName);
}

/** The table `waypoint list` prints (istioctl's columns; PROGRAMMED is the condition's status, False when absent). */
export function waypointTable(gws: Obj[], allNamespaces: boolean): string {
  const w = new TabWriter(0, 5);
  if (allNamespaces) w.row('NAMESPACE', 'NAME', 'REVISION', 'PROGRAMMED');
  else w.row('NAME', 'REVISION', 'PROGRAMMED');
  for (const gw of gws) {
    const rev = gw.metadata.labels?.[REV_LABEL] || 'default';
    const prog = conditions(gw).find((c) => c.type === 'Programmed')?.status ?? 'False';
    if (allNamespaces) w.row(gw.metadata.namespace, gw.metadata.name, rev, prog);
    else w.row(gw.metadata.name, rev, prog);
  }
  return w.flush();
}

async function namespaceLabels(client: OrchClient, ns: string): Promise<Record<string, string>> {
  try {
    const o = (await client.getJson(`/api/v1/namespaces/${encodeURIComponent(ns)}`)) as Obj;
    return o.metadata?.labels ?? {};
  } catch (e) {
    if (apiStatus(e) === 404) throw new CommandError(`namespace: ${ns} not found`);
    if (apiStatus(e) === undefined || apiStatus(e) === 401 || apiStatus(e) === 403) throw e;
    throw new CommandError(`failed to get namespace ${ns}: ${(e as Error).message}`);
  }
}

/** Polls the Gateway until Programmed=True or the deadline; the last Gateway read (undefined if never read). */
async function untilProgrammed(client: OrchClient, ns: string, name: string, timeoutMs: number): Promise<{ gw?: Obj; ok: boolean; err?: string }> {
  const deadline = Date.now() + timeoutMs;
  let last: { gw?: Obj; ok: boolean; err?: string } = { ok: false };
  for (;;) {
    try {
      const gw = (await client.getJson(`${gatewaysPath(ns)}/${encodeURIComponent(name)}`)) as Obj;
      last = { gw, ok: programmed(gw) };
    } catch (e) {
      if (apiStatus(e) === undefined || apiStatus(e) === 401 || apiStatus(e) === 403) throw e;
      last = { ...last, ok: false, err: (e as Error).message };
    }
    if (last.ok || Date.now() >= deadline) return last;
    await new Promise((r) => setTimeout(r, Math.min(POLL_MS, Math.max(10, deadline - Date.now()))));
  }
}

function timeoutError(what: string, ns: string, name: string, timeoutMs: number, err?: string): CommandError {
  return new CommandError(`${what}\t${ns}/${name}${err ? `: ${err}` : ''} (not Programmed after ${formatDurationMs(timeoutMs)}; ${NO_DATA_PLANE})`);
}

async function applyIn(ctx: RunContext, client: OrchClient, out: string[]): Promise<void> {
  const ns = commandNamespace(ctx, client);
  const name = flagString(ctx, 'name');
  const enroll = flagBool(ctx, 'enroll-namespace');
  const labels = await namespaceLabels(client, ns);
  if (enroll) {
    if (!flagBool(ctx, 'overwrite') && labels[USE_WAYPOINT_LABEL]) {
      ctx.stdout.write(
        `⚠️ Warning: namespace (${ns}) already has an enrolled Waypoint. Consider adding the \`--overwrite\` flag to your apply command.\n`,
      );
      return;
    }
    out.push(
      `⚠️ Warning: mesh has no ambient mode: the namespace's "${USE_WAYPOINT_LABEL}" label is recorded, but no traffic goes through the waypoint\n`,
    );
  }
  let gw: Obj;
  try {
    gw = waypointGateway({ name, namespace: ns, trafficType: flagString(ctx, 'for'), revision: flagString(ctx, 'revision') });
  } catch (e) {
    throw new CommandError(`failed to create gateway: ${(e as Error).message}`);
  }
  const gwName = gw.metadata.name as string;
  try {
    await client.request('PATCH', `${gatewaysPath(ns)}/${encodeURIComponent(gwName)}`, {
      body: gw,
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager: 'meshctl' },
    });
  } catch (e) {
    if (apiStatus(e) === 404)
      throw new CommandError(`missing Gateway API CRDs need to be installed before applying a waypoint: ${(e as Error).message}`);
    throw e;
  }
  ctx.stdout.write(out.splice(0).join('') + `✅ waypoint ${ns}/${gwName} applied\n`);
  if (flagBool(ctx, 'wait')) {
    const timeoutMs = flagNumber(ctx, 'waypoint-timeout');
    const r = await untilProgrammed(client, ns, gwName, timeoutMs);
    if (!r.ok) throw timeoutError('timed out while waiting for waypoint', ns, gwName, timeoutMs, r.err);
    ctx.stdout.write(`✅ waypoint ${ns}/${gwName} is ready!\n`);
  }
  if (enroll) {
    await client.request('PATCH', `/api/v1/namespaces/${encodeURIComponent(ns)}`, {
      body: { metadata: { labels: { [USE_WAYPOINT_LABEL]: gwName } } },
      contentType: 'application/merge-patch+json',
    });
    ctx.stdout.write(`✅ namespace ${ns} labeled with "${USE_WAYPOINT_LABEL}: ${gwName}"\n`);
  }
}

export const apply: Handler = async (ctx) => {
  await withOrch(ctx, 'waypoint apply', (client) => applyIn(ctx, client, []));
  return 0;
};

export const list: Handler = async (ctx) => {
  const all = flagBool(ctx, 'all-namespaces');
  const text = await withOrch(ctx, 'waypoint list', async (client) => {
    const gws = await listWaypoints(client, all ? '' : commandNamespace(ctx, client));
    return gws.length === 0 ? 'No waypoints found.\n' : waypointTable(gws, all);
  });
  ctx.stdout.write(text);
  return 0;
};

/** One row per waypoint: its Programmed condition (istioctl prints that one, else the last condition). */
export function statusTable(rows: Obj[], withNamespace: boolean): string {
  const w = new TabWriter(0, 5);
  if (withNamespace) w.row('NAMESPACE', 'NAME', 'STATUS', 'TYPE', 'REASON', 'MESSAGE');
  else w.row('NAME', 'STATUS', 'TYPE', 'REASON', 'MESSAGE');
  for (const gw of rows) {
    const conds = conditions(gw);
    const c = conds.find((x) => x.type === 'Programmed') ?? conds[conds.length - 1] ?? {};
    const cells = [gw.metadata.name, c.status ?? '', c.type ?? '', c.reason ?? '', c.message ?? ''];
    if (withNamespace) w.row(gw.metadata.namespace, ...cells);
    else w.row(...cells);
  }
  return w.flush();
}

export const status: Handler = async (ctx) => {
  if (ctx.args.length !== 0) throw new CommandError(`unknown subcommand "${ctx.args[0]}"`);
  const timeoutMs = flagNumber(ctx, 'waypoint-timeout');
  return withOrch(ctx, 'waypoint status', async (client) => {
    const ns = commandNamespace(ctx, client);
    const gws = await listWaypoints(client, ns);
    if (gws.length === 0) {
      ctx.stdout.write('No waypoints found.\n');
      return 0;
    }
    const deadline = Date.now() + timeoutMs;
    const rows: Obj[] = [];
    let late: Obj | undefined;
    for (const gw of gws) {
      const r = await untilProgrammed(client, ns, gw.metadata.name, Math.max(0, deadline - Date.now()));
      rows.push(r.gw ?? gw);
      if (!r.ok) {
        late = r.gw ?? gw;
        break;
      }
    }
    ctx.stdout.write(statusTable(rows, flagString(ctx, 'namespace') === ''));
    if (late) throw timeoutError('timed out while retrieving status for waypoint', ns, late.metadata.name, timeoutMs);
    return 0;
  });
};

export const remove: Handler = async (ctx) => {
  const all = flagBool(ctx, 'all');
  const revision = flagString(ctx, 'revision');
  const names = ctx.args;
  if ((all || revision) && names.length > 0) throw new CommandError('cannot specify waypoint names when deleting all waypoints');
  if (!(all || revision) && names.length === 0) {
    throw new CommandError('must specify a waypoint name or delete all using --all or delete specific revision using --revision');
  }
  return withOrch(ctx, 'waypoint delete', async (client) => {
    const ns = commandNamespace(ctx, client);
    let targets: string[];
    if (names.length === 0) {
      targets = (await listWaypoints(client, ns, revision ? `${REV_LABEL}=${revision}` : undefined)).map((g) => g.metadata.name);
    } else {
      const present = new Set((await listWaypoints(client, ns)).map((g) => g.metadata.name as string));
      targets = [];
      for (const n of names) {
        if (present.has(n)) targets.push(n);
        else ctx.stdout.write(`waypoint ${ns}/${n} not found\n`);
      }
    }
    const failures: string[] = [];
    for (const n of targets) {
      try {
        await client.request('DELETE', `${gatewaysPath(ns)}/${encodeURIComponent(n)}`);
        ctx.stdout.write(`waypoint ${ns}/${n} deleted\n`);
      } catch (e) {
        if (apiStatus(e) === 404) ctx.stdout.write(`waypoint ${ns}/${n} not found\n`);
        else if (apiStatus(e) === undefined || apiStatus(e) === 401 || apiStatus(e) === 403) throw e;
        else failures.push((e as Error).message);
      }
    }
    if (failures.length) throw new CommandError(failures.join('; '));
    return 0;
  });
};
