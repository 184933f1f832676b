// `meshctl nodeproxy-config …` (istioctl ztunnel-config): a node proxy's workloads, services, policies,
// certificates and connections from its config dump. With --file (or "-") the dump is read from there; a live
// node proxy is found through the control plane like the sidecars of proxy-config, but this mesh has no node
// proxy of its own yet, so a named pod that is a sidecar or gateway is refused as istioctl refuses non-ztunnel
// pods, and --node (a DaemonSet lookup in istioctl) needs the orchestrator.
import { CommandError, type Handler, type RunContext } from '../../cli/context';
import { readInput } from '../io';
import { proxyDo, resolveProxy } from '../target';
import {
  certificateDump,
  certificateSummary,
  connectionsDump,
  connectionsSummary,
  fullDump,
  fullSummary,
  NodeProxyDump,
  NodeProxyDumpError,
  policyDump,
  policySummary,
  serviceDump,
  serviceSummary,
  workloadDump,
  workloadSummary,
  type NodeProxyFormat,
} from './writers';

function str(ctx: RunContext, name: string): string {
  return (ctx.flags[name] as string | undefined) ?? '';
}

/** istioctl's commonFlags.validateArgs. */
function validateArgs(ctx: RunContext): void {
  const set = (str(ctx, 'file') ? 1 : 0) + (ctx.args.length === 1 ? 1 : 0) + (str(ctx, 'node') ? 1 : 0);
  if (set > 1) throw new CommandError('at most one of --file, --node, or pod name must be passed');
}

/** A node proxy is an agent connected with the ztunnel node type; the mesh's proxies are sidecars and gateways. */
function isNodeProxy(md: Record<string, unknown>): boolean {
  return md['NODE_TYPE'] === 'ztunnel' || md['PROXY_TYPE'] === 'ztunnel';
}

async function liveTarget(ctx: RunContext) {
  if (str(ctx, 'node'))
    throw new CommandError(
      '--node needs the orchestrator API to find the node proxy of a node, which this command does not use yet: name the pod or give --file',
    );
  if (ctx.args.length === 0) {
    throw new CommandError('no node proxy named: name the node proxy pod (<name>[.<namespace>]) or give a config dump with --file');
  }
  const t = await resolveProxy(ctx, ctx.args[0]!);
  if (!isNodeProxy(t.metadata)) throw new CommandError(`workloads command is only supported by node proxies: ${t.name}`);
  return t;
}

async function dump(ctx: RunContext): Promise<NodeProxyDump> {
  const file = str(ctx, 'file');
  let text: string;
  if (file) text = readInput(file);
  else {
    const t = await liveTarget(ctx);
    try {
      text = await proxyDo(t, 'GET', 'config_dump', 15000);
    } catch (e) {
      throw new CommandError(
        `failed to execute command on ${t.name}.${t.namespace} node proxy: ${(e as Error).message.replace(/^failed to execute command on \S+ sidecar: /, '')}`,
      );
    }
  }
  return NodeProxyDump.parse(text);
}

function handler(body: (ctx: RunContext, d: NodeProxyDump, format: NodeProxyFormat | undefined) => string): Handler {
  return async (ctx) => {
    validateArgs(ctx);
    const output = str(ctx, 'output') || 'short';
    let out: string;
    try {
      const d = await dump(ctx);
      if (output !== 'short' && output !== 'json' && output !== 'yaml') throw new CommandError(`output format "${output}" not supported`);
      out = body(ctx, d, output === 'short' ? undefined : output);
    } catch (e) {
      if (e instanceof NodeProxyDumpError) throw new CommandError(e.message);
      throw e;
    }
    ctx.stdout.write(out);
    return 0;
  };
}

export const all = handler((_ctx, d, f) => (f ? fullDump(d, f) : fullSummary(d)));

export const certificate = handler((_ctx, d, f) => (f ? certificateDump(d, f) : certificateSummary(d)));

export const connections = handler((ctx, d, f) => {
  const filter = { namespace: str(ctx, 'workload-namespace'), direction: str(ctx, 'direction'), raw: ctx.flags['raw'] === true };
  return f ? connectionsDump(d, filter, f) : connectionsSummary(d, filter);
});

export const policy = handler((ctx, d, f) => (f ? policyDump(d, str(ctx, 'policy-namespace'), f) : policySummary(d, str(ctx, 'policy-namespace'))));

export const service = handler((ctx, d, f) =>
  f ? serviceDump(d, str(ctx, 'service-namespace'), f) : serviceSummary(d, str(ctx, 'service-namespace')),
);

export const workload = handler((ctx, d, f) => {
  const filter = { namespace: str(ctx, 'workload-namespace'), address: str(ctx, 'address'), node: str(ctx, 'workload-node') };
  return f ? workloadDump(d, filter, f) : workloadSummary(d, filter);
});

const LEVELS = new Set(['trace', 'debug', 'info', 'warning', 'warn', 'error', 'critical', 'off']);

/** istioctl's ztunnelLogLevel: the node proxy's names for Envoy's levels. */
function nodeProxyLevel(level: string): string {
  if (level === 'warning') return 'warn';
  if (level === 'critical') return 'error';
  return level;
}

export const log: Handler = async (ctx) => {
  validateArgs(ctx);
  const level = str(ctx, 'level');
  const reset = ctx.flags['reset'] === true;
  if (reset && level) throw new CommandError('--level cannot be combined with --reset');
  const output = str(ctx, 'output');
  if (output !== '' && output !== 'short') throw new CommandError('--output is not applicable for this command');
  if (str(ctx, 'file')) throw new CommandError('log needs a live node proxy: --file does not apply');
  if (level) {
    for (const ol of level.split(',')) {
      const loggerAndLevel = ol.split('::').pop() ?? '';
      const m = /[:=]/.exec(loggerAndLevel);
      const lvl = !ol.includes(':') && !ol.includes('=') ? ol : m ? loggerAndLevel.slice(m.index + 1) : '';
      if (!LEVELS.has(lvl)) throw new CommandError(`unrecognized logging level: ${lvl}`);
    }
  }
  const t = await liveTarget(ctx);
  let q = `level=${nodeProxyLevel(reset ? 'info' : level)}`;
  if (reset) {
    ctx.stderr.write('warn\tlog level reset; using default value "info" for node proxy\n');
    q += '&reset';
  }
  let resp: string;
  try {
    resp = await proxyDo(t, 'POST', `logging?${q}`, (ctx.flags['proxy-admin-port'] as number | undefined) ?? 15000);
  } catch (e) {
    throw new CommandError(`${t.name}.${t.namespace}: failed to execute command on node proxy: ${(e as Error).message}`);
  }
  ctx.stdout.write(`${t.name}.${t.namespace}:\n${resp}\n`);
  return 0;
};
