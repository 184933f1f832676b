// `meshctl admin log`: the daemon's log scopes read and set over its ControlZ JSON API (`/scopej/`, GET the
// list, PUT `/scopej/<scope>`), as istioctl 1.26 istioctl/pkg/admin/istiodconfig.go does. Differs on purpose:
// istioctl port-forwards to the pod through the kubelet; we reach the daemon pod's IP directly (as
// prometheus-address.ts and target.ts do), and with no cluster configured we ask the daemon this machine
// runs: the host of the xDS address meshctl is configured with (--xds-address, MESHCTL_XDS_ADDRESS,
// ~/.meshctl/config.yaml), else localhost, at --ctrlz_port. Only `--reset` of istioctl's three reset flags is
// in the specification: it resets both levels (info, none).
import { CommandError, flagBool, flagNumber, flagString, type Handler, type RunContext } from '../cli/context';
import { joinHostPort, splitHostPort } from '../lib/hostport';
import { TabWriter } from '../lib/tabwriter';
import { stringify } from 'yaml';
import { meshctlOrchClient, orchConfigPath, apiStatus } from './orch';
import { connectionFailure } from './orch-errors';
import { xdsOptions } from './xds';

/** istioctl's ScopeInfo (omitempty fields left out when empty). */
export interface ScopeInfo {
  name: string;
  description?: string;
  output_level?: string;
  stack_trace_level?: string;
  log_callers?: boolean;
}

const VALIDATION = /^[\w\- ]+:(none|error|warn|info|debug)/;

/** `--level a:debug,b:info` → scope updates; istioctl's `pattern X did not match` on a bad pair. */
export function scopeLevelPairs(text: string, field: 'output_level' | 'stack_trace_level'): ScopeInfo[] {
  return text.split(',').map((pair) => {
    if (!VALIDATION.test(pair)) throw new CommandError(`pattern ${pair} did not match`);
    const [name, level] = pair.split(':');
    return { name: name!, [field]: level! };
  });
}

/** The `-o short` table and the json/yaml documents of getAllLogLevelsState. */
export function formatScopes(scopes: readonly ScopeInfo[], format: string): string {
  const rows = [...scopes]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((s) => ({
      scope_name: s.name,
      log_level: s.output_level ?? '',
      stack_trace_level: s.stack_trace_level ?? '',
      description: s.description ?? '',
    }));
  if (format === 'short') {
    // tabwriter.Init(out, 0, 8, 3, ' ', 0)
    const w = new TabWriter(0, 3).row('ACTIVE SCOPE', 'DESCRIPTION', 'LOG LEVEL', 'STACK TRACE LEVEL');
    for (const r of rows) w.row(r.scope_name, r.description, r.log_level, r.stack_trace_level);
    return w.flush();
  }
  const json = JSON.stringify(rows.length === 0 ? null : rows, null, 2) + '\n';
  if (format === 'json') return json;
  if (format === 'yaml') return rows.length === 0 ? 'null\n' : stringify(rows, { lineWidth: 0, sortMapEntries: true });
  throw new CommandError(`output format "${format}" not supported`);
}

/** A ControlZ `/scopej` client (ControlzClient). */
export class ControlZ {
  constructor(readonly base: string) {}

  private async call(method: string, path: string, body?: unknown): Promise<Response> {
    try {
      return await fetch(`${this.base}${path}`, {
        method,
        ...(body !== undefined ? { body: JSON.stringify(body) + '\n', headers: { 'content-type': 'application/json' } } : {}),
      });
    } catch (e) {
      throw new CommandError(`cannot reach meshd's ControlZ at ${this.base}: ${connectionFailure(e)}`);
    }
  }

  async scopes(): Promise<ScopeInfo[]> {
    const res = await this.call('GET', '');
    if (res.status !== 200) throw new CommandError(`could not get scopes information: request not successful ${res.status} ${res.statusText}`);
    try {
      return (await res.json()) as ScopeInfo[];
    } catch (e) {
      throw new CommandError(`could not get scopes information: cannot deserialize response ${(e as Error).message}`);
    }
  }

  /** PutScopes: every update sent at once; the first failure is the error. */
  async put(scopes: readonly ScopeInfo[]): Promise<void> {
    const results = await Promise.all(
      scopes.map(async (s) => {
        const res = await this.call('PUT', `/${encodeURIComponent(s.name)}`, s);
        return res.status === 202
          ? undefined
          : `failed updating Scope ${s.name}: cannot update resource ${s.name}, got status ${res.status} ${res.statusText}`;
      }),
    );
    const failed = results.find((r) => r !== undefined);
    if (failed) throw new CommandError(failed);
  }
}

interface Pod {
  metadata: { name: string; namespace: string };
  status?: { podIP?: string };
}

/** The daemon pod: the one named, else the first with the label selector and the revision's label. */
async function daemonPod(ctx: RunContext, meshNamespace: string): Promise<Pod> {
  const client = await meshctlOrchClient(ctx, 'admin log');
  const name = ctx.args[0];
  if (name) {
    try {
      return (await client.getJson(`/api/v1/namespaces/${encodeURIComponent(meshNamespace)}/pods/${encodeURIComponent(name)}`)) as Pod;
    } catch (e) {
      if (apiStatus(e) === 404) throw new CommandError(`pods "${name}" not found`);
      throw e;
    }
  }
  const revision = flagString(ctx, 'revision') || 'default';
  const given = flagString(ctx, 'selector');
  const selector = given ? `${given},mesh.io/rev=${revision}` : `mesh.io/rev=${revision}`;
  const list = (await client.getJson(`/api/v1/namespaces/${encodeURIComponent(meshNamespace)}/pods`, { labelSelector: selector })) as {
    items?: Pod[];
  };
  const pods = list.items ?? [];
  if (pods.length === 0) throw new CommandError('no pods found');
  if (pods.length > 1) ctx.stderr.write(`more than 1 pods fits selector: ${selector}; will use pod: ${pods[0]!.metadata.name}\n`);
  return pods[0]!;
}

/** Where ControlZ answers: the daemon pod's IP with a cluster, else the configured daemon's host. */
async function controlzBase(ctx: RunContext): Promise<string> {
  const port = flagNumber(ctx, 'ctrlz_port');
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new CommandError(`port number ${port} must be in the range 1..65535`);
  const xds = xdsOptions(ctx);
  if (orchConfigPath(ctx)) {
    const pod = await daemonPod(ctx, xds.meshNamespace);
    const ip = pod.status?.podIP;
    if (!ip) throw new CommandError(`pod ${pod.metadata.name}.${pod.metadata.namespace} has no IP address yet`);
    return `http://${joinHostPort(ip, port)}/scopej`;
  }
  if (ctx.args[0])
    throw new CommandError(
      `finding pod ${ctx.args[0]} needs the orchestrator API: no client configuration (give --orchconfig, or set ORCHCONFIG or KUBECONFIG)`,
    );
  let host = 'localhost';
  if (xds.address) {
    try {
      host = splitHostPort(xds.address).host || 'localhost';
    } catch {
      host = xds.address;
    }
  }
  return `http://${joinHostPort(host, port)}/scopej`;
}

export const run: Handler = async (ctx) => {
  const level = flagString(ctx, 'level');
  const stack = flagString(ctx, 'stack-trace-level');
  const reset = flagBool(ctx, 'reset');
  if (reset && level) throw new CommandError('--level cannot be combined with --reset');
  if (reset && stack) throw new CommandError('--stack-trace-level cannot be combined with --reset');
  const updates = [...(level ? scopeLevelPairs(level, 'output_level') : []), ...(stack ? scopeLevelPairs(stack, 'stack_trace_level') : [])];
  const cz = new ControlZ(await controlzBase(ctx));
  if (reset) {
    const all = await cz.scopes();
    await cz.put(all.map((s) => ({ name: s.name, output_level: 'info', stack_trace_level: 'none' })));
    return 0;
  }
  if (updates.length > 0) {
    await cz.put(updates);
    return 0;
  }
  ctx.stdout.write(formatScopes(await cz.scopes(), flagString(ctx, 'output')));
  return 0;
};
