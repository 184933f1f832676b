// `meshctl proxy-status` (istioctl proxy-status): the daemon's sync state of every proxy (syncz over ADS),
// or, for one proxy, the diff between what the daemon would send it and what the proxy holds.
import type { JsonValue } from '@bufbuild/protobuf';
import { anyUnpack, timestampMs } from '@bufbuild/protobuf/wkt';
import { ClusterSchema } from '../gen/envoy/config/cluster/v3/cluster_pb';
import { ListenerSchema } from '../gen/envoy/config/listener/v3/listener_pb';
import { RouteConfigurationSchema } from '../gen/envoy/config/route/v3/route_pb';
import { ClientConfigSchema, ConfigStatus, type ClientConfig } from '../gen/envoy/service/status/v3/csds_pb';
import { CommandError, type Handler, type RunContext } from '../cli/context';
import { splitLines, unifiedDiff } from '../lib/difflib';
import { goSortSlice } from '../lib/gosort';
import { TabWriter } from '../lib/tabwriter';
import { TYPE_URL } from '../lib/xds/type-urls';
import { readInput } from './io';
import { ConfigDump, ConfigDumpError, indentJson, messageJson, unpackAs } from './proxyconfig/dump';
import { proxyDo, resolveProxy } from './target';
import { controlPlaneInfo, xdsOptions, xdsRequest } from './xds';

/** k8s.io/apimachinery's duration.HumanDuration. */
export function humanDuration(ms: number): string {
  const seconds = Math.trunc(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.trunc(seconds / 60);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.trunc(seconds / 3600);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${Math.trunc(hours / 24)}d` : `${Math.trunc(hours / 24)}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${Math.trunc(hours / 24)}d`;
  if (hours < 24 * 365 * 8) {
    const dy = Math.trunc(hours / 24) % 365;
    return dy === 0 ? `${Math.trunc(hours / 24 / 365)}y` : `${Math.trunc(hours / 24 / 365)}y${dy}d`;
  }
  return `${Math.trunc(hours / 24 / 365)}y`;
}

export interface SyncRow {
  proxy: string;
  cluster: string;
  cds: string;
  lds: string;
  eds: string;
  rds: string;
  ecds: string;
  meshd: string;
  version: string;
}

function formatStatus(c: ClientConfig['genericXdsConfigs'][number], now: number): string {
  switch (c.configStatus) {
    case ConfigStatus.UNKNOWN:
      return 'IGNORED';
    case ConfigStatus.NOT_SENT:
      return 'NOT SENT';
    default: {
      let s = ConfigStatus[c.configStatus] ?? String(c.configStatus);
      if (c.lastUpdated) s += ` (${humanDuration(now - timestampMs(c.lastUpdated))})`;
      return s;
    }
  }
}

function metadataString(md: Record<string, JsonValue> | undefined, ...keys: string[]): string {
  for (const k of keys) if (typeof md?.[k] === 'string') return md[k] as string;
  return '';
}

/** Rows of Istio's XdsStatusWriter from the ClientConfigs each daemon answered, sorted by proxy over all. */
export function syncRows(answers: ReadonlyArray<{ meshd: string; configs: readonly ClientConfig[] }>, namespace: string, now: number): SyncRow[] {
  const rows: SyncRow[] = [];
  for (const { meshd, configs } of answers) {
    for (const cc of configs) {
      const md = cc.node?.metadata as Record<string, JsonValue> | undefined;
      if (namespace && metadataString(md, 'NAMESPACE') !== namespace) continue;
      const row: SyncRow = {
        proxy: cc.node?.id ?? '',
        cluster: metadataString(md, 'CLUSTER_ID'),
        cds: 'IGNORED',
        lds: 'IGNORED',
        eds: 'IGNORED',
        rds: 'IGNORED',
        ecds: 'IGNORED',
        meshd,
        version: metadataString(md, 'MESH_VERSION', 'ISTIO_VERSION'),
      };
      for (const c of cc.genericXdsConfigs) {
        const s = formatStatus(c, now);
        if (c.typeUrl === TYPE_URL.listener) row.lds = s;
        else if (c.typeUrl === TYPE_URL.cluster) row.cds = s;
        else if (c.typeUrl === TYPE_URL.route) row.rds = s;
        else if (c.typeUrl === TYPE_URL.endpoint) row.eds = s;
        else if (c.typeUrl === TYPE_URL.extensionConfig) row.ecds = s;
      }
      rows.push(row);
    }
  }
  return goSortSlice(rows, (a, b) => a.proxy < b.proxy);
}

export function syncTable(rows: readonly SyncRow[]): string {
  const w = new TabWriter(0, 5);
  w.row('NAME', 'CLUSTER', 'CDS', 'LDS', 'EDS', 'RDS', 'ECDS', 'MESHD', 'VERSION');
  for (const r of rows) w.row(r.proxy, r.cluster, r.cds, r.lds, r.eds, r.rds, r.ecds, r.meshd, r.version);
  return w.flush();
}

// ---- diff of one proxy ----

type Section = { name: string; dump: (d: ConfigDump) => unknown };

function dynamicClusters(d: ConfigDump): unknown {
  const dump = d.clusterDump();
  const dac = [...dump.dynamicActiveClusters];
  const nameOf = (x: (typeof dac)[number]) => (x.cluster ? ((unpackAs(x.cluster, ClusterSchema) as unknown as { name: string }).name ?? '') : '');
  goSortSlice(dac, (a, b) => nameOf(a) < nameOf(b));
  return {
    dynamicActiveClusters: dac.map((c) => ({ cluster: c.cluster ? messageJson(ClusterSchema, unpackAs(c.cluster, ClusterSchema)) : undefined })),
  };
}

function dynamicListeners(d: ConfigDump): unknown {
  const dump = d.listenerDump();
  const dal = dump.dynamicListeners.filter((l) => l.activeState);
  const nameOf = (x: (typeof dal)[number]) =>
    x.activeState?.listener ? (unpackAs(x.activeState.listener, ListenerSchema) as unknown as { name: string }).name : '';
  goSortSlice(dal, (a, b) => nameOf(a) < nameOf(b));
  return {
    dynamicListeners: dal.map((l) => ({
      activeState: { listener: l.activeState!.listener ? messageJson(ListenerSchema, unpackAs(l.activeState!.listener, ListenerSchema)) : undefined },
    })),
  };
}

function dynamicRoutes(d: ConfigDump): unknown {
  const dump = d.routeDump();
  const drc = [...dump.dynamicRouteConfigs];
  const nameOf = (x: (typeof drc)[number]) =>
    x.routeConfig ? (unpackAs(x.routeConfig, RouteConfigurationSchema) as unknown as { name: string }).name : '';
  goSortSlice(drc, (a, b) => nameOf(a) < nameOf(b));
  return {
    dynamicRouteConfigs: drc.map((r) => ({
      routeConfig: r.routeConfig ? messageJson(RouteConfigurationSchema, unpackAs(r.routeConfig, RouteConfigurationSchema)) : undefined,
    })),
  };
}

const SECTIONS: readonly Section[] = [
  { name: 'Clusters', dump: dynamicClusters },
  { name: 'Listeners', dump: dynamicListeners },
  { name: 'Routes', dump: dynamicRoutes },
];

function rendered(d: ConfigDump, s: Section): string {
  try {
    return indentJson(JSON.parse(JSON.stringify(s.dump(d))) as JsonValue);
  } catch (e) {
    return (e as Error).message;
  }
}

function lastRouteUpdate(d: ConfigDump): number | undefined {
  try {
    let last = 0;
    for (const r of d.routeDump().dynamicRouteConfigs) if (r.lastUpdated) last = Math.max(last, timestampMs(r.lastUpdated));
    return last > 0 ? last : undefined;
  } catch {
    return undefined;
  }
}

/** RFC1123 in local time, as Go's time.RFC1123 ("Mon, 02 Jan 2006 15:04:05 MST"). */
function rfc1123(ms: number): string {
  const d = new Date(ms);
  const days = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  const p = (n: number) => String(n).padStart(2, '0');
  const tz = new Intl.DateTimeFormat('en-US', { timeZoneName: 'short' }).formatToParts(d).find((x) => x.type === 'timeZoneName')?.value ?? 'UTC';
  return `${days[d.getDay()]}, ${p(d.getDate())} ${months[d.getMonth()]} ${d.getFullYear()} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())} ${tz}`;
}

/** Istio's Comparator.Diff: clusters, listeners and routes, daemon side first. */
export function compareDumps(daemon: ConfigDump, proxy: ConfigDump): string {
  let out = '';
  for (const s of SECTIONS) {
    const text = unifiedDiff(splitLines(rendered(daemon, s)), splitLines(rendered(proxy, s)), `Meshd ${s.name}`, `Envoy ${s.name}`, 7);
    let suffix = '';
    if (s.name === 'Routes') {
      const last = lastRouteUpdate(proxy);
      if (last !== undefined) suffix = ` (RDS last loaded at ${rfc1123(last)})`;
    }
    if (text) out += `${s.name} Don't Match${suffix}\n${text}\n`;
    else out += `${s.name} Match${suffix}\n`;
  }
  return out;
}

async function proxyStatusFor(ctx: RunContext): Promise<string> {
  const o = xdsOptions(ctx);
  if (ctx.args.length > 0) {
    const file = (ctx.flags['file'] as string | undefined) ?? '';
    const target = await resolveProxy(ctx, ctx.args[0]!);
    let proxyText: string;
    try {
      proxyText = file ? readInput(file) : await proxyDo(target, 'GET', 'config_dump');
    } catch (e) {
      throw new CommandError(`could not contact sidecar: ${(e as Error).message}`);
    }
    const res = await xdsRequest(o, 'istio.io/debug/config_dump', [`${target.name}.${target.namespace}`]);
    if (!res.resources.length) throw new CommandError('unable to find config dump in Meshd responses');
    const daemon = ConfigDump.fromConfigs(res.resources);
    return compareDumps(daemon, ConfigDump.parse(proxyText));
  }
  const res = await xdsRequest(o, 'istio.io/debug/syncz');
  const cp = controlPlaneInfo(res);
  const configs: ClientConfig[] = [];
  for (const r of res.resources) {
    const cc = anyUnpack(r, ClientConfigSchema);
    if (!cc) throw new CommandError(`could not unmarshal ClientConfig: unexpected type ${r.typeUrl}`);
    configs.push(cc);
  }
  return syncTable(syncRows([{ meshd: cp.ID, configs }], (ctx.flags['namespace'] as string) ?? '', Date.now()));
}

export const run: Handler = async (ctx) => {
  let out: string;
  try {
    out = await proxyStatusFor(ctx);
  } catch (e) {
    if (e instanceof ConfigDumpError) throw new CommandError(e.message);
    throw e;
  }
  ctx.stdout.write(out);
  return 0;
};
