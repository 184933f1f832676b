// The agent's view of the proxy: only Envoy's admin API on localhost (the contract both Envoy and the
// built-in engine honour). Parsers are pure; AdminClient does the calls.
import { httpCall, type HttpResult } from './http-client';
import { joinHostPort } from '../lib/hostport';

/** Envoy's `/stats` text: `name: value` lines. Lines that do not parse are returned in `bad`. */
export function parseStatsText(text: string): { values: Map<string, number>; bad: string[] } {
  const values = new Map<string, number>();
  const bad: string[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const i = line.lastIndexOf(':');
    const name = line.slice(0, i).trim();
    const raw = line.slice(i + 1).trim();
    if (i < 0 || name === '' || !/^\d+$/.test(raw)) {
      bad.push(line);
      continue;
    }
    if (!values.has(name)) values.set(name, Number(raw));
  }
  return { values, bad };
}

export const UPDATE_STATS_FILTER = '^(cluster_manager\\.cds|listener_manager\\.lds)\\.(update_success|update_rejected)$';
export const ACTIVE_CONNECTIONS_FILTER = 'downstream_cx_active$';

export interface UpdateStats {
  cdsSuccess: number;
  cdsRejected: number;
  ldsSuccess: number;
  ldsRejected: number;
}

export function updateStatsFrom(text: string): UpdateStats {
  const { values } = parseStatsText(text);
  return {
    cdsSuccess: values.get('cluster_manager.cds.update_success') ?? 0,
    cdsRejected: values.get('cluster_manager.cds.update_rejected') ?? 0,
    ldsSuccess: values.get('listener_manager.lds.update_success') ?? 0,
    ldsRejected: values.get('listener_manager.lds.update_rejected') ?? 0,
  };
}

export function updateStatsText(s: UpdateStats): string {
  return `cds updates: ${s.cdsSuccess} successful, ${s.cdsRejected} rejected; lds updates: ${s.ldsSuccess} successful, ${s.ldsRejected} rejected`;
}

/**
 * Istio's activeProxyConnections: the sum of `listener.<addr>.downstream_cx_active`, skipping per-worker
 * stats and the agent's own listeners (status, Prometheus, admin). -1 when the proxy reports no such stat.
 */
export function activeConnectionsFrom(text: string, known: ReadonlySet<string>): { active: number; warnings: string[] } {
  if (text.trim() === '') return { active: -1, warnings: [] };
  const warnings: string[] = [];
  let active = 0;
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const sep = line.indexOf(':');
    if (sep < 0) {
      warnings.push(`envoy stat line is missing separator. line:${line}`);
      continue;
    }
    const name = line.slice(0, sep).trim();
    if (!name.startsWith('listener.') || name.includes('worker_') || known.has(name)) continue;
    const raw = line.slice(sep + 1).trim();
    if (!/^\d+$/.test(raw)) {
      warnings.push(`failed parsing Envoy stat ${name} line: ${line}`);
      continue;
    }
    active += Number(raw);
  }
  return { active, warnings };
}

/** The agent's own listeners on the proxy, not counted as application connections. */
export function knownAgentListeners(statusPort: number, prometheusPort: number): Set<string> {
  return new Set([
    `listener.0.0.0.0_${statusPort}.downstream_cx_active`,
    `listener.0.0.0.0_${prometheusPort}.downstream_cx_active`,
    `listener.[__]_${statusPort}.downstream_cx_active`,
    `listener.[__]_${prometheusPort}.downstream_cx_active`,
    'listener.admin.downstream_cx_active',
    'listener.admin.main_thread.downstream_cx_active',
  ]);
}

export interface ListenerStatus {
  name: string;
  address?: string;
  port?: number;
}

/** Envoy's `/listeners?format=json` (envoy.admin.v3.Listeners). */
export function listenersFrom(json: string): ListenerStatus[] {
  const doc = JSON.parse(json) as { listener_statuses?: Array<Record<string, unknown>> };
  return (doc.listener_statuses ?? []).map((l) => {
    const local = (l['local_address'] ?? l['localAddress']) as Record<string, Record<string, unknown>> | undefined;
    const sa = local?.['socket_address'] ?? local?.['socketAddress'];
    const port = sa?.['port_value'] ?? sa?.['portValue'];
    return {
      name: String(l['name'] ?? ''),
      address: typeof sa?.['address'] === 'string' ? sa['address'] : undefined,
      port: typeof port === 'number' ? port : undefined,
    };
  });
}

export class AdminClient {
  constructor(
    readonly host: string,
    readonly port: number,
    private readonly timeoutMs = 3000,
  ) {}

  url(path: string): string {
    return `http://${joinHostPort(this.host, this.port)}/${path.replace(/^\//, '')}`;
  }

  private ok(r: HttpResult, what: string): string {
    if (r.status !== 200) throw new Error(`${what}: HTTP status code ${r.status}: ${r.body.trim()}`);
    return r.body;
  }

  async get(path: string, timeoutMs = this.timeoutMs, headers?: Record<string, string>): Promise<HttpResult> {
    return httpCall(this.url(path), { timeoutMs, headers });
  }

  async post(path: string, timeoutMs = this.timeoutMs): Promise<HttpResult> {
    return httpCall(this.url(path), { method: 'POST', timeoutMs });
  }

  async updateStats(): Promise<UpdateStats> {
    const r = await this.get(`stats?usedonly&filter=${encodeURIComponent(UPDATE_STATS_FILTER)}`);
    return updateStatsFrom(this.ok(r, 'stats'));
  }

  /** `GET /ready`: 200 `LIVE` once the proxy is initialised. */
  async serverState(): Promise<string> {
    const r = await this.get('ready');
    const state = r.body.trim();
    if (r.status !== 200) return state || `HTTP ${r.status}`;
    return state;
  }

  async listeners(): Promise<ListenerStatus[]> {
    const r = await this.get('listeners?format=json');
    return listenersFrom(this.ok(r, 'listeners'));
  }

  async activeConnections(known: ReadonlySet<string>): Promise<{ active: number; warnings: string[] }> {
    const r = await this.get(`stats?usedonly&filter=${encodeURIComponent(ACTIVE_CONNECTIONS_FILTER)}`, 2000);
    return activeConnectionsFrom(this.ok(r, 'stats'), known);
  }

  /** Istio's DrainListeners: `drain_listeners?inboundonly&graceful` for sidecars, `?graceful` otherwise. */
  async drainListeners(inboundOnly: boolean, skipExit: boolean): Promise<string> {
    let path = inboundOnly ? 'drain_listeners?inboundonly&graceful' : 'drain_listeners?graceful';
    if (skipExit) path += '&skip_exit';
    return this.ok(await this.post(path), 'drain_listeners');
  }

  async quit(): Promise<void> {
    this.ok(await this.post('quitquitquit'), 'quitquitquit');
  }
}
