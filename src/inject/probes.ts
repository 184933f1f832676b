// Rewriting application probes so the kubelet asks the agent's status port (Istio's app_probe.go): the
// original probes go into MESH_ORCH_APP_PROBERS as JSON keyed by /app-health/<container>/{readyz,livez,
// startupz} and /app-lifecycle/<container>/{prestopz,poststartz}; the probes themselves become HTTP GETs of
// those paths on the status port. Named ports resolve to numbers; already-rewritten probes are left alone.
import { goBool } from '../lib/gostrconv';
import { goJsonText, normalize, type Json, type JsonObject } from '../orch/typed';
import { PROXY_CONTAINER } from '../config/containers';

export const APP_PROBERS_ENV = 'MESH_ORCH_APP_PROBERS';
const REWRITE_ANNOTATION = 'sidecar.mesh.io/rewriteAppHTTPProbers';
const STATUS_PORT_ANNOTATION = 'status.sidecar.mesh.io/port';

export function shouldRewriteAppHTTPProbers(annotations: Record<string, string>, specSetting: boolean): boolean {
  const v = annotations[REWRITE_ANNOTATION];
  if (v !== undefined) {
    const b = goBool(v);
    if (b !== undefined) return b;
  }
  return specSetting;
}

function proberUrls(container: string): { readyz: string; livez: string; startupz: string; prestopz: string; poststartz: string } {
  return {
    readyz: `/app-health/${container}/readyz`,
    livez: `/app-health/${container}/livez`,
    startupz: `/app-health/${container}/startupz`,
    prestopz: `/app-lifecycle/${container}/prestopz`,
    poststartz: `/app-lifecycle/${container}/poststartz`,
  };
}

type Prober = { httpGet?: JsonObject; tcpSocket?: JsonObject; grpc?: JsonObject; timeoutSeconds?: number };

function probeToProber(probe: JsonObject | undefined, lifecycle = false): Prober | undefined {
  if (!probe) return undefined;
  const timeout = lifecycle ? undefined : (probe.timeoutSeconds as number | undefined);
  if (probe.httpGet) return { httpGet: probe.httpGet as JsonObject, timeoutSeconds: timeout };
  if (probe.tcpSocket) return { tcpSocket: probe.tcpSocket as JsonObject, timeoutSeconds: timeout };
  if (!lifecycle && probe.grpc) return { grpc: probe.grpc as JsonObject, timeoutSeconds: timeout };
  return undefined;
}

function updateNamedPort(p: Prober | undefined, ports: Map<string, number>, target: number): Prober | undefined {
  if (!p) return undefined;
  if (p.grpc) return p;
  if (!p.httpGet && !p.tcpSocket) return undefined;
  const action = { ...(p.httpGet ?? p.tcpSocket)! };
  const port = action.port;
  if (typeof port === 'string') {
    const n = ports.get(port);
    if (n === undefined) return undefined;
    action.port = n;
  } else if (port === target) {
    return undefined;
  }
  return p.httpGet ? { ...p, httpGet: action } : { ...p, tcpSocket: action };
}

function proberJson(p: Prober): Json {
  const out: JsonObject = {};
  if (p.httpGet) out.httpGet = normalize(p.httpGet, 'core.HTTPGetAction');
  if (p.tcpSocket) out.tcpSocket = normalize(p.tcpSocket, 'core.TCPSocketAction');
  if (p.grpc) out.grpc = normalize(p.grpc, 'core.GRPCAction');
  if (p.timeoutSeconds) out.timeoutSeconds = p.timeoutSeconds;
  return out;
}

function allContainers(pod: JsonObject): JsonObject[] {
  const spec = (pod.spec ?? {}) as JsonObject;
  return [...((spec.initContainers as JsonObject[]) ?? []), ...((spec.containers as JsonObject[]) ?? [])];
}

/** The MESH_ORCH_APP_PROBERS value for the pod ("" when it has no probes to take over). */
export function dumpAppProbers(pod: JsonObject, targetPort: number): string {
  const out: Record<string, Json> = {};
  for (const c of allContainers(pod)) {
    if (c.name === PROXY_CONTAINER) continue;
    const urls = proberUrls(String(c.name));
    const ports = new Map<string, number>();
    for (const p of (c.ports as JsonObject[]) ?? []) if (p.name) ports.set(String(p.name), Number(p.containerPort));
    const add = (url: string, p: Prober | undefined) => {
      const u = updateNamedPort(p, ports, targetPort);
      if (u) out[url] = proberJson(u);
    };
    add(urls.readyz, probeToProber(c.readinessProbe as JsonObject | undefined));
    add(urls.livez, probeToProber(c.livenessProbe as JsonObject | undefined));
    add(urls.startupz, probeToProber(c.startupProbe as JsonObject | undefined));
    const lc = c.lifecycle as JsonObject | undefined;
    if (lc) {
      add(urls.prestopz, probeToProber(lc.preStop as JsonObject | undefined, true));
      add(urls.poststartz, probeToProber(lc.postStart as JsonObject | undefined, true));
    }
  }
  const keys = Object.keys(out).sort();
  if (!keys.length) return '';
  return goJsonText(Object.fromEntries(keys.map((k) => [k, out[k]!])));
}

function rewriteAction(action: JsonObject, url: string, port: number): void {
  action.port = port;
  action.path = url;
  if (action.scheme === 'HTTPS') action.scheme = 'HTTP';
}

function convert(probe: JsonObject | undefined, url: string, port: number, lifecycle = false): JsonObject | undefined {
  if (!probe) return undefined;
  const p = JSON.parse(JSON.stringify(probe)) as JsonObject;
  if (p.httpGet) {
    rewriteAction(p.httpGet as JsonObject, url, port);
    return p;
  }
  if (p.tcpSocket || (!lifecycle && p.grpc)) {
    const action: JsonObject = {};
    rewriteAction(action, url, port);
    p.httpGet = action;
    delete p.tcpSocket;
    delete p.grpc;
    return p;
  }
  return undefined;
}

/** Points the app containers' probes at the agent (patchRewriteProbe). */
export function rewriteProbes(annotations: Record<string, string>, pod: JsonObject, defaultPort: number): void {
  let statusPort = defaultPort;
  const v = annotations[STATUS_PORT_ANNOTATION];
  if (v !== undefined) statusPort = /^[-+]?\d+$/.test(v.trim()) ? Number(v) : 0;
  const spec = (pod.spec ?? {}) as JsonObject;
  for (const list of [(spec.containers as JsonObject[]) ?? [], (spec.initContainers as JsonObject[]) ?? []]) {
    for (const c of list) {
      if (c.name === PROXY_CONTAINER) continue;
      const urls = proberUrls(String(c.name));
      const r = convert(c.readinessProbe as JsonObject | undefined, urls.readyz, statusPort);
      if (r) c.readinessProbe = r;
      const l = convert(c.livenessProbe as JsonObject | undefined, urls.livez, statusPort);
      if (l) c.livenessProbe = l;
      const s = convert(c.startupProbe as JsonObject | undefined, urls.startupz, statusPort);
      if (s) c.startupProbe = s;
      const lc = c.lifecycle as JsonObject | undefined;
      if (lc) {
        const pre = convert(lc.preStop as JsonObject | undefined, urls.prestopz, statusPort, true);
        if (pre) lc.preStop = pre;
        const post = convert(lc.postStart as JsonObject | undefined, urls.poststartz, statusPort, true);
        if (post) lc.postStart = post;
      }
    }
  }
}
