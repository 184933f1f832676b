// Gateways a router proxy serves (Istio model.MergeGateways, simplified to what the generators use):
// servers grouped by port; HTTP servers of a port share the route `http.<port>`, HTTPS servers that
// terminate TLS get `https.<port>.<portName>.<gateway>.<namespace>`; a port keeps the kind of its first
// server (plain HTTP, or TLS/TCP), later servers of the other kind are dropped like Istio does.
import type { Config, Server } from '../../config/types';
import { selectorMatches } from '../labels';
import { parseProtocol } from '../registry/protocol';
import { byAge } from './visibility';

export interface GatewayServer {
  gateway: Config<'Gateway'>;
  /** `namespace/name` of the Gateway, as VirtualServices reference it. */
  gatewayName: string;
  server: Server;
  /** RDS route name for HTTP and TLS-terminated HTTPS servers; undefined for TCP/TLS passthrough. */
  routeName?: string;
  /** Server hosts with the `namespace/` part split off (`*` namespace when none was written). */
  hosts: Array<{ namespace: string; host: string }>;
}

export interface GatewayPort {
  port: number;
  bind?: string;
  /** `http` when plain HTTP servers own the port, otherwise `tls` (HTTPS, TLS, TCP, MONGO). */
  kind: 'http' | 'tls';
  servers: GatewayServer[];
}

export interface MergedGateway {
  gatewayNames: ReadonlySet<string>;
  ports: GatewayPort[];
  serversByRouteName: ReadonlyMap<string, GatewayServer[]>;
}

export function isHttpServer(s: Server): boolean {
  const p = parseProtocol(s.port.protocol);
  return p === 'HTTP' || p === 'HTTP2' || p === 'GRPC';
}

export function isPassthrough(s: Server): boolean {
  return s.tls?.mode === 'PASSTHROUGH' || s.tls?.mode === 'AUTO_PASSTHROUGH';
}

/** HTTPS server terminating TLS: gets an HTTP connection manager behind a TLS context. */
export function isHttpsTerminating(s: Server): boolean {
  return parseProtocol(s.port.protocol) === 'HTTPS' && !!s.tls && !isPassthrough(s);
}

/** Istio gatewayRDSRouteName. */
export function gatewayRouteName(s: Server, gw: Config<'Gateway'>): string | undefined {
  const bind = s.bind ? `.${s.bind}` : '';
  if (isHttpServer(s)) return `http.${s.port.number}${bind}`;
  if (isHttpsTerminating(s)) return `https.${s.port.number}.${s.port.name}.${gw.meta.name}.${gw.meta.namespace}${bind}`;
  return undefined;
}

export function parseServerHost(h: string, gatewayNamespace: string): { namespace: string; host: string } {
  const i = h.indexOf('/');
  if (i < 0) return { namespace: '*', host: h };
  const ns = h.slice(0, i);
  return { namespace: ns === '.' ? gatewayNamespace : ns, host: h.slice(i + 1) };
}

/** Gateways whose selector matches the proxy's labels (a Gateway without selector applies to all). */
export function selectGateways(
  gateways: readonly Config<'Gateway'>[],
  proxyNamespace: string,
  proxyLabels: Readonly<Record<string, string>>,
  scopeToNamespace: boolean,
): Config<'Gateway'>[] {
  return gateways
    .filter((g) => (!scopeToNamespace || g.meta.namespace === proxyNamespace) && selectorMatches(g.spec.selector, proxyLabels))
    .sort(byAge);
}

function labelsText(labels: Readonly<Record<string, string>>): string {
  const entries = Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return entries.length ? `{${entries.map(([k, v]) => `${k}: ${v}`).join(', ')}}` : '{}';
}

/**
 * Why a router proxy gets no listener, in words an operator can act on: its labels, and either the
 * Gateways that select it (whose servers then gave nothing to listen on) or the selectors it did not
 * match. A gateway that silently listens on nothing is the usual symptom of a label typo or of labels
 * passed under a name the agent does not read.
 */
export function explainNoGatewayListeners(
  gateways: readonly Config<'Gateway'>[],
  proxy: { id: string; namespace: string; labels: Readonly<Record<string, string>> },
  scopeToNamespace: boolean,
  limit = 10,
): string {
  const head = `gateway proxy ${proxy.id} with labels ${labelsText(proxy.labels)} gets no listeners`;
  const selected = selectGateways(gateways, proxy.namespace, proxy.labels, scopeToNamespace);
  if (selected.length) {
    const names = selected.map((g) => `${g.meta.namespace}/${g.meta.name}`).join(', ');
    return `${head}: the Gateways selecting it (${names}) have no server it can serve (no route bound, or ports taken by servers of another protocol)`;
  }
  if (gateways.length === 0) return `${head}: there is no Gateway resource`;
  const candidates = gateways.filter((g) => !scopeToNamespace || g.meta.namespace === proxy.namespace);
  if (candidates.length === 0) return `${head}: no Gateway in its namespace ${proxy.namespace} (PILOT_SCOPE_GATEWAY_TO_NAMESPACE is on)`;
  const shown = candidates.slice(0, limit).map((g) => `${g.meta.namespace}/${g.meta.name} ${labelsText(g.spec.selector ?? {})}`);
  const more = candidates.length > limit ? ` and ${candidates.length - limit} more` : '';
  return `${head}: no Gateway selects it; selectors not matched: ${shown.join('; ')}${more}`;
}

export function mergeGateways(gateways: readonly Config<'Gateway'>[]): MergedGateway {
  const ports = new Map<string, GatewayPort>();
  const byRoute = new Map<string, GatewayServer[]>();
  const names = new Set<string>();
  for (const gw of gateways) {
    const gatewayName = `${gw.meta.namespace}/${gw.meta.name}`;
    names.add(gatewayName);
    for (const server of gw.spec.servers ?? []) {
      const kind: GatewayPort['kind'] = isHttpServer(server) ? 'http' : 'tls';
      const key = `${server.bind ?? ''}:${server.port.number}`;
      let gp = ports.get(key);
      if (!gp) {
        gp = { port: server.port.number, ...(server.bind ? { bind: server.bind } : {}), kind, servers: [] };
        ports.set(key, gp);
      } else if (gp.kind !== kind) {
        continue; // Istio: "a port cannot mix plain HTTP and TLS/TCP servers"; the first one wins
      }
      const routeName = gatewayRouteName(server, gw);
      const gs: GatewayServer = {
        gateway: gw,
        gatewayName,
        server,
        ...(routeName ? { routeName } : {}),
        hosts: server.hosts.map((h) => parseServerHost(h, gw.meta.namespace)),
      };
      gp.servers.push(gs);
      if (routeName) {
        const list = byRoute.get(routeName) ?? [];
        list.push(gs);
        byRoute.set(routeName, list);
      }
    }
  }
  return {
    gatewayNames: names,
    ports: [...ports.values()].sort((a, b) => a.port - b.port || (a.bind ?? '').localeCompare(b.bind ?? '')),
    serversByRouteName: byRoute,
  };
}
