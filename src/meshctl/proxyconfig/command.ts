// `meshctl proxy-config …` (istioctl proxy-config): tables and dumps of a proxy's configuration, read from a
// config dump file (--file, "-" for stdin) or from a live proxy found through the control plane.
import { X509Certificate } from 'node:crypto';
import { CommandError, type Handler, type RunContext } from '../../cli/context';
import { jsonToGoYaml } from '../../lib/goyaml';
import { readInput } from '../io';
import { proxyDo, resolveProxy, type ProxyTarget } from '../target';
import {
  bootstrapDumpOutput,
  bootstrapSummary,
  clusterDumpOutput,
  clusterSummary,
  ConfigDump,
  ConfigDumpError,
  ecdsDumpOutput,
  ecdsSummary,
  endpointDumpOutput,
  endpointSummary,
  fullSummary,
  listenerDumpOutput,
  listenerSummary,
  parseClusters,
  rootCA,
  routeDumpOutput,
  routeSummary,
  secretDumpOutput,
  secretSummary,
  type ClusterFilter,
  type EndpointFilter,
  type ListenerFilter,
  type OutputFormat,
  type RouteFilter,
} from './writers';

const EDS_PATH = '?include_eds=true';
const SECRET_PATH = '?mask=dynamic_active_secrets,dynamic_warming_secrets';
const CLUSTER_PATH = '?mask=dynamic_active_clusters,dynamic_warming_clusters,static_clusters';
const LISTENER_PATH = '?mask=dynamic_listeners,static_listeners';
const ROUTE_PATH = '?mask=dynamic_route_configs,static_route_configs';
const BOOTSTRAP_PATH = '?mask=bootstrap';

function str(ctx: RunContext, name: string): string {
  return (ctx.flags[name] as string | undefined) ?? '';
}
function num(ctx: RunContext, name: string): number {
  return (ctx.flags[name] as number | undefined) ?? 0;
}

/** istioctl's Args check: exactly one of a target and --file. */
function checkSource(ctx: RunContext, what: string): void {
  if ((ctx.args.length === 1) === (str(ctx, 'file') !== '')) throw new CommandError(`${what} requires pod name or --file parameter`);
}

/** The config dump text: the --file, or the live proxy's /config_dump with `query`. */
async function dumpText(ctx: RunContext, query: string): Promise<string> {
  const file = str(ctx, 'file');
  if (file) return readInput(file);
  const target = await resolveProxy(ctx, ctx.args[0]!);
  return proxyDo(target, 'GET', `config_dump${query}`);
}

async function dump(ctx: RunContext, query: string): Promise<ConfigDump> {
  return ConfigDump.parse(await dumpText(ctx, query));
}

function output(ctx: RunContext): string {
  return str(ctx, 'output') || 'short';
}

function dumpFormat(ctx: RunContext): OutputFormat | undefined {
  const o = output(ctx);
  return o === 'json' || o === 'yaml' ? o : undefined;
}

function unsupported(ctx: RunContext): never {
  throw new CommandError(`output format "${output(ctx)}" not supported`);
}

function clusterFilter(ctx: RunContext): ClusterFilter {
  return { fqdn: str(ctx, 'fqdn'), port: num(ctx, 'port'), subset: str(ctx, 'subset'), direction: str(ctx, 'direction') };
}
function listenerFilter(ctx: RunContext): ListenerFilter {
  return { address: str(ctx, 'address'), port: num(ctx, 'port'), type: str(ctx, 'type'), verbose: ctx.flags['verbose'] !== false };
}
function routeFilter(ctx: RunContext): RouteFilter {
  return { name: str(ctx, 'name'), verbose: ctx.flags['verbose'] !== false };
}
function endpointFilter(ctx: RunContext): EndpointFilter {
  return { address: str(ctx, 'address'), port: num(ctx, 'port'), cluster: str(ctx, 'cluster'), status: str(ctx, 'status') };
}

/** Runs `body`, turning dump errors into command errors; writes only a complete result. */
function handler(body: (ctx: RunContext) => Promise<string>): Handler {
  return async (ctx) => {
    let out: string;
    try {
      out = await body(ctx);
    } catch (e) {
      if (e instanceof ConfigDumpError) throw new CommandError(e.message);
      throw e;
    }
    ctx.stdout.write(out);
    return 0;
  };
}

export const cluster = handler(async (ctx) => {
  checkSource(ctx, 'cluster');
  const d = await dump(ctx, CLUSTER_PATH);
  if (output(ctx) === 'short') return clusterSummary(d, clusterFilter(ctx));
  return clusterDumpOutput(d, clusterFilter(ctx), dumpFormat(ctx) ?? unsupported(ctx));
});

export const listener = handler(async (ctx) => {
  checkSource(ctx, 'listener');
  if (ctx.flags['waypoint'] === true)
    throw new CommandError(
      '--waypoint (the waypoint listener view) needs ambient mode, which mesh does not have: no proxy serves waypoint listeners',
    );
  const d = await dump(ctx, LISTENER_PATH);
  if (output(ctx) === 'short') return listenerSummary(d, listenerFilter(ctx));
  return listenerDumpOutput(d, listenerFilter(ctx), dumpFormat(ctx) ?? unsupported(ctx));
});

export const route = handler(async (ctx) => {
  checkSource(ctx, 'route');
  const d = await dump(ctx, ROUTE_PATH);
  if (output(ctx) === 'short') return routeSummary(d, routeFilter(ctx));
  return routeDumpOutput(d, routeFilter(ctx), dumpFormat(ctx) ?? unsupported(ctx));
});

export const endpoint = handler(async (ctx) => {
  checkSource(ctx, 'endpoints');
  const file = str(ctx, 'file');
  const text = file ? readInput(file) : await proxyDo(await resolveProxy(ctx, ctx.args[0]!), 'GET', 'clusters?format=json');
  const statuses = parseClusters(text);
  if (output(ctx) === 'short') return endpointSummary(statuses, endpointFilter(ctx));
  return endpointDumpOutput(statuses, endpointFilter(ctx), dumpFormat(ctx) ?? unsupported(ctx));
});

export const bootstrap = handler(async (ctx) => {
  checkSource(ctx, 'bootstrap');
  const d = await dump(ctx, BOOTSTRAP_PATH);
  if (output(ctx) === 'short') return bootstrapSummary(d);
  return bootstrapDumpOutput(d, dumpFormat(ctx) ?? unsupported(ctx));
});

export const secret = handler(async (ctx) => {
  checkSource(ctx, 'secret');
  const d = await dump(ctx, SECRET_PATH);
  if (output(ctx) === 'short') return secretSummary(d);
  return secretDumpOutput(d, dumpFormat(ctx) ?? unsupported(ctx));
});

export const ecds = handler(async (ctx) => {
  checkSource(ctx, 'ecds');
  const d = await dump(ctx, EDS_PATH);
  if (output(ctx) === 'short') return ecdsSummary(d);
  return ecdsDumpOutput(d, dumpFormat(ctx) ?? unsupported(ctx));
});

export const all = handler(async (ctx) => {
  checkSource(ctx, 'all');
  const text = await dumpText(ctx, EDS_PATH);
  const fmt = dumpFormat(ctx);
  if (fmt) {
    if (fmt === 'json') return text + '\n';
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      throw new CommandError(`error converting JSON to YAML: ${(e as Error).message}`);
    }
    return jsonToGoYaml(parsed) + '\n';
  }
  if (output(ctx) !== 'short') unsupported(ctx);
  return fullSummary(ConfigDump.parse(text), clusterFilter(ctx), listenerFilter(ctx), routeFilter(ctx), endpointFilter(ctx));
});

// ---- log ----

const LEVELS: Readonly<Record<string, string>> = {
  trace: 'trace',
  debug: 'debug',
  info: 'info',
  warning: 'warning',
  warn: 'warning',
  error: 'error',
  critical: 'critical',
  off: 'off',
};
const DEFAULT_LOGGER = 'level';

async function targets(ctx: RunContext): Promise<ProxyTarget[]> {
  if (str(ctx, 'selector'))
    throw new CommandError('--selector needs the orchestrator API to list pods, which this command does not use yet: name the pod');
  return [await resolveProxy(ctx, ctx.args[0]!)];
}

export const log: Handler = async (ctx) => {
  const level = str(ctx, 'level');
  const reset = ctx.flags['reset'] === true;
  if (!str(ctx, 'selector') && ctx.args.length < 1) throw new CommandError('log requires pod name or --selector');
  if (reset && level) throw new CommandError('--level cannot be combined with --reset');
  if (output(ctx) !== 'short') throw new CommandError('--output is not applicable for this command');
  // A misspelt level is the user's mistake whatever the proxy says: report it before reaching the proxy
  // (logger names still need the proxy's list, below).
  for (const ol of level ? level.split(',') : []) {
    const m = /[:=]/.exec(ol.split('::').pop()!);
    const lvl = m
      ? ol
          .split('::')
          .pop()!
          .slice(m.index + 1)
      : ol;
    if (!LEVELS[lvl]) throw new CommandError(`unrecognized logging level: ${lvl}`);
  }
  const pods = await targets(ctx);
  let loggerNames = '';
  for (const p of pods) loggerNames = await proxyDo(p, 'POST', 'logging');
  const dest = new Map<string, string>();
  if (reset) {
    // istioctl reads the injector ConfigMap's global.proxy.logLevel and warns when it cannot; with no
    // cluster there is no ConfigMap to miss, so the chart's default applies silently.
    dest.set(DEFAULT_LOGGER, 'warning');
  } else if (level) {
    for (const ol of level.split(',')) {
      if (!ol.includes(':') && !ol.includes('=')) {
        const l = LEVELS[ol];
        if (!l) throw new CommandError(`unrecognized logging level: ${ol}`);
        dest.clear();
        dest.set(DEFAULT_LOGGER, l);
      } else {
        const parts = ol.split('::');
        const loggerAndLevel = parts[parts.length - 1]!;
        const m = /[:=]/.exec(loggerAndLevel)!;
        const logger = loggerAndLevel.slice(0, m.index);
        const lvl = loggerAndLevel.slice(m.index + 1);
        if (!loggerNames.includes(logger) && logger !== DEFAULT_LOGGER) throw new CommandError(`unrecognized logger name: ${logger}`);
        const l = LEVELS[lvl];
        if (!l) throw new CommandError(`unrecognized logging level: ${lvl}`);
        dest.set(logger, l);
      }
    }
  }
  const errs: string[] = [];
  let out = '';
  for (const p of pods) {
    try {
      let resp = '';
      if (dest.size === 0) resp = await proxyDo(p, 'POST', 'logging');
      else {
        const all = dest.get(DEFAULT_LOGGER);
        if (all) resp = await proxyDo(p, 'POST', `logging?${DEFAULT_LOGGER}=${all}`);
        for (const [lg, l] of dest) if (lg !== DEFAULT_LOGGER) resp = await proxyDo(p, 'POST', `logging?${encodeURIComponent(lg)}=${l}`);
      }
      out += `${p.name}.${p.namespace}:\n${resp}`;
    } catch (e) {
      errs.push(`error configuring log level for ${p.name}.${p.namespace}: ${(e as Error).message}`);
    }
  }
  ctx.stdout.write(out);
  if (errs.length) throw new CommandError(errs.join('\n'));
  return 0;
};

// ---- rootca-compare ----

function pemCerts(data: string): X509Certificate[] {
  const blocks = data.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g);
  if (!blocks) throw new CommandError(`failed to parse certificates: ${data}`);
  return blocks.map((b) => {
    try {
      return new X509Certificate(b);
    } catch (e) {
      throw new CommandError(`failed to parse certificate: ${(e as Error).message}`);
    }
  });
}

export const rootcaCompare: Handler = async (ctx) => {
  if (ctx.args.length !== 2) throw new CommandError('rootca-compare requires 2 pods as an argument');
  const pods = [await resolveProxy(ctx, ctx.args[0]!), await resolveProxy(ctx, ctx.args[1]!)];
  const roots: X509Certificate[][] = [];
  for (const p of pods) {
    try {
      roots.push(pemCerts(rootCA(ConfigDump.parse(await proxyDo(p, 'GET', `config_dump${SECRET_PATH}`)))));
    } catch (e) {
      if (e instanceof ConfigDumpError) throw new CommandError(e.message);
      throw e;
    }
  }
  const [a, b] = pods as [ProxyTarget, ProxyTarget];
  const match = roots[0]!.some((c1) => roots[1]!.some((c2) => c1.raw.equals(c2.raw)));
  if (match) {
    ctx.stdout.write(
      `Both [${a.name}.${a.namespace}] and [${b.name}.${b.namespace}] have the identical ROOTCA, theoretically the connectivity between them is available\n`,
    );
    return 0;
  }
  throw new CommandError(
    `Both [${a.name}.${a.namespace}] and [${b.name}.${b.namespace}] have the non identical ROOTCA, theoretically the connectivity between them is unavailable`,
  );
};
