// The differential harness (issue 27, item 3): one scenario — a mesh config, named echo backends, a list of
// requests — run through a gateway on our engine and through the same gateway with the real Envoy as the agent's
// data plane (test/helpers/gateway.ts starts both), and what the client and the backends observed compared field by
// field. Only what must differ between two runs is normalised: Date, Server, the value of
// x-envoy-upstream-service-time, request ids and trace ids (their presence is kept). Follows no Istio source; the
// observations are what Envoy's docs say a client or upstream sees (router, HCM header sanitising, XFCC).
import http from 'node:http';
import type { Test } from 'tap';
import { startGateway, type GatewayOptions, type GatewayPorts, type GatewayRig } from './gateway';
import { nacks, type DataPlane } from './envoy';
import { summarize } from './agent';
import { waitFor } from './wait';
import { serveForTest } from './ports';

/** One request a client sends to the gateway's port (or to `port`). */
export interface DiffRequest {
  name: string;
  method?: string;
  path: string;
  /** The Host (:authority); default `gw.example`. */
  host?: string;
  headers?: Record<string, string>;
  body?: string;
  /**
   * Send it `times` times and observe only whether the share of answers of each backend instance is within
   * `tolerance` (a fraction) of `weights` (percent): the same verdict is expected of both data planes.
   */
  split?: { times: number; weights: Record<string, number>; tolerance: number };
  /** Which backend instances received it (mirroring): as soon as another than the answering one has, or after this many ms. */
  mirrorWaitMs?: number;
  /** The gateway listener's port, when not the HTTP server on `ports.gw`. */
  port?: (ports: ScenarioPorts) => number;
  /**
   * A client other than one HTTP/1.1 request (TLS, HTTP/2, gRPC, WebSockets, TCP: test/helpers/differential-clients.ts):
   * it makes the exchange and returns what it observed; `status` there decides readiness.
   */
  client?: (ports: ScenarioPorts) => Promise<Observation>;
}

/** The ports a scenario's config is written from. */
export interface ScenarioPorts extends GatewayPorts {
  /** Each echo backend's port, by instance name. */
  backends: Record<string, number>;
  /** Extra free ports the scenario asked for (other gateway servers), by name. */
  extra: Record<string, number>;
}

export interface Scenario {
  name: string;
  /** Echo backend instance names; each answers naming itself. */
  backends: string[];
  /**
   * Backends other than the plain echo (TLS, gRPC, WebSocket, TCP), by instance name: each starts one and
   * returns its port (in `ports.backends`) and what it saw.
   */
  servers?: Record<string, (t: Test) => Promise<{ port: number; seen: EchoRecord[] }>>;
  /** Names of further free ports the config needs (HTTPS or TCP servers). */
  extraPorts?: string[];
  config(ports: ScenarioPorts): string;
  requests: DiffRequest[];
  /** A request that succeeds (2xx, or `readyStatus`) once the config has arrived; default the first request. */
  ready?: DiffRequest;
  readyStatus?: number;
  gateway?: Partial<Omit<GatewayOptions, 'config' | 'dataPlane'>>;
}

/** What the echo backend saw of one request. */
export interface EchoRecord {
  instance: string;
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** What a TLS backend saw of the handshake (SNI, ALPN, the client certificate's CN). */
  tls?: Record<string, unknown>;
}

/** What a client and the backends observed of one request, normalised; `answers` instead for repeated requests. */
export type Observation = Record<string, unknown>;

/** Headers whose value differs from run to run on any data plane: their presence is compared, not their value. */
const VOLATILE = new Set([
  'x-request-id',
  'x-b3-traceid',
  'x-b3-spanid',
  'x-b3-parentspanid',
  'traceparent',
  'tracestate',
  'x-envoy-upstream-service-time',
]);
/** Response headers dropped: they differ by run (date) or by product (server) by design. */
const DROPPED = new Set(['date', 'server']);

/**
 * The echo backend of scenario requests. Request headers steer it: `x-echo-status: <code>`,
 * `x-echo-delay-ms: <ms>`, `x-echo-fail: <n>` (the first n requests with the same `x-echo-key` answer 503),
 * `x-echo-header: name=value` (a response header). It answers JSON naming the instance and what it received.
 */
export async function startEchoBackend(t: Test, instance: string): Promise<{ port: number; seen: EchoRecord[] }> {
  const seen: EchoRecord[] = [];
  const server = http.createServer(echoHandler(instance, seen));
  const port = await serveForTest(t, server);
  return { port, seen };
}

/** The echo backend's request handler (startEchoBackend), for servers of other kinds; `describe` adds to each record. */
export function echoHandler(
  instance: string,
  seen: EchoRecord[],
  describe?: (req: http.IncomingMessage) => Partial<EchoRecord>,
): http.RequestListener {
  const attempts = new Map<string, number>();
  return (req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const rec: EchoRecord = { instance, method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, ...describe?.(req) };
      seen.push(rec);
      const h = (n: string) => (typeof req.headers[n] === 'string' ? (req.headers[n] as string) : undefined);
      const key = h('x-echo-key') ?? '';
      const n = (attempts.get(key) ?? 0) + 1;
      attempts.set(key, n);
      const failing = n <= Number(h('x-echo-fail') ?? 0);
      const answer = () => {
        const extra = h('x-echo-header')?.split('=') ?? [];
        res.writeHead(failing ? 503 : Number(h('x-echo-status') ?? 200), {
          'content-type': 'application/json',
          ...(extra.length === 2 ? { [extra[0]!]: extra[1]! } : {}),
        });
        res.end(JSON.stringify(rec));
      };
      const delay = Number(h('x-echo-delay-ms') ?? 0);
      if (delay > 0) setTimeout(answer, delay);
      else answer();
    });
  };
}

interface RawReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One HTTP/1.1 request on its own connection. A reset or a time-out is an observation, not a failure. */
export function send(port: number, r: DiffRequest, timeoutMs = 15_000): Promise<RawReply | { error: string }> {
  return new Promise((resolve) => {
    const headers: Record<string, string> = { host: r.host ?? 'gw.example', ...r.headers };
    if (r.body !== undefined) headers['content-length'] = String(Buffer.byteLength(r.body));
    const req = http.request({ host: '127.0.0.1', port, method: r.method ?? 'GET', path: r.path, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', (e) => resolve({ error: e.message }));
    });
    req.on('error', (e) => resolve({ error: (e as NodeJS.ErrnoException).code ?? e.message }));
    req.setTimeout(timeoutMs, () => req.destroy(new Error('client time-out')));
    req.end(r.body);
  });
}

export function normaliseHeaders(h: http.IncomingHttpHeaders, drop: Set<string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(h).sort()) {
    if (drop.has(k)) continue;
    out[k] = VOLATILE.has(k) ? '<varies>' : h[k];
  }
  return out;
}

function asEcho(body: string): EchoRecord | undefined {
  try {
    const v = JSON.parse(body) as EchoRecord;
    return typeof v?.instance === 'string' && typeof v.path === 'string' ? v : undefined;
  } catch {
    return undefined;
  }
}

/** What a client and the backend observed of one reply: echo replies structurally, others as text. */
export function observe(reply: RawReply | { error: string }): Observation {
  if ('error' in reply) return { error: reply.error };
  const echo = asEcho(reply.body);
  // an echo body's length follows from what it reports, which is compared field by field
  const drop = echo ? new Set([...DROPPED, 'content-length']) : DROPPED;
  const o: Observation = { status: reply.status, headers: normaliseHeaders(reply.headers, drop) };
  if (echo) {
    o['backend'] = {
      instance: echo.instance,
      method: echo.method,
      path: echo.path,
      body: echo.body,
      headers: normaliseHeaders(echo.headers, new Set()),
      ...(echo.tls ? { tls: echo.tls } : {}),
    };
  } else o['body'] = reply.body;
  return o;
}

async function runRequest(ports: ScenarioPorts, r: DiffRequest, seen: Record<string, EchoRecord[]>): Promise<Observation> {
  if (r.client) return r.client(ports);
  const port = r.port ? r.port(ports) : ports.gw;
  if (r.split) {
    const { times, weights, tolerance } = r.split;
    const answers: Record<string, number> = {};
    for (let i = 0; i < times; i++) {
      const reply = await send(port, r);
      const who = 'error' in reply ? `error ${reply.error}` : (asEcho(reply.body)?.instance ?? `status ${reply.status}`);
      answers[who] = (answers[who] ?? 0) + 1;
    }
    const names = new Set([...Object.keys(weights), ...Object.keys(answers)]);
    const within = [...names].every((n) => Math.abs((answers[n] ?? 0) / times - (weights[n] ?? 0) / 100) <= tolerance);
    return { split: within ? `within ${tolerance * 100}% of ${JSON.stringify(weights)}` : answers };
  }
  const key = r.headers?.['x-echo-key'];
  const before = Object.fromEntries(Object.entries(seen).map(([k, v]) => [k, v.length]));
  const o = observe(await send(port, r));
  if (r.mirrorWaitMs !== undefined) {
    // until another instance than the one that answered got a copy, or the time is up
    const copied = () =>
      Object.entries(seen).some(([inst, recs]) => inst !== (o['backend'] as EchoRecord | undefined)?.instance && recs.length > before[inst]!);
    const until = Date.now() + r.mirrorWaitMs;
    while (!copied() && Date.now() < until) await new Promise((res) => setTimeout(res, 50));
    // every instance's copies of this request, with the Host and path each got
    const copies: Record<string, unknown[]> = {};
    for (const [inst, recs] of Object.entries(seen)) {
      const got = recs.slice(before[inst]).filter((x) => key === undefined || x.headers['x-echo-key'] === key);
      if (got.length) copies[inst] = got.map((x) => ({ host: x.headers.host, path: x.path }));
    }
    o['received'] = copies;
  }
  return o;
}

export interface PlaneRun {
  observations: Record<string, Observation>;
  nacks: string[];
  rig: GatewayRig;
}

/** Runs the scenario's requests through a gateway on `plane`: backends, daemon and agent are the scenario's own. */
export async function runScenario(t: Test, s: Scenario, plane: DataPlane): Promise<PlaneRun> {
  const seen: Record<string, EchoRecord[]> = {};
  const backendPorts: Record<string, number> = {};
  for (const name of s.backends) {
    const b = await startEchoBackend(t, name);
    seen[name] = b.seen;
    backendPorts[name] = b.port;
  }
  for (const [name, start] of Object.entries(s.servers ?? {})) {
    const b = await start(t);
    seen[name] = b.seen;
    backendPorts[name] = b.port;
  }
  const { freePort } = await import('./ports');
  const extra: Record<string, number> = {};
  for (const n of s.extraPorts ?? []) extra[n] = await freePort();
  let ports: ScenarioPorts | undefined;
  const rig = await startGateway(t, {
    ...s.gateway,
    dataPlane: plane,
    config: (p) => s.config((ports = { ...p, backends: backendPorts, extra })),
  });
  const ready = s.ready ?? s.requests[0]!;
  await waitFor(
    () => `${s.name} on ${plane}: ${ready.name} never ready:\n${summarize(rig.agentOut())}`,
    async () => {
      const o = ready.client ? await ready.client(ports!) : observe(await send(ready.port ? ready.port(ports!) : ports!.gw, ready));
      return s.readyStatus !== undefined ? o['status'] === s.readyStatus : (o['status'] as number) >= 200 && (o['status'] as number) < 300;
    },
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  const observations: Record<string, Observation> = {};
  for (const r of s.requests) observations[r.name] = await runRequest(ports!, r, seen);
  return { observations, nacks: await nacks(rig.daemon, rig.agentOut()), rig };
}

/** Flattens an observation into `a.b.c → value` leaves, so two runs are compared leaf by leaf. */
export function flatten(v: unknown, prefix = '', out: Record<string, string> = {}): Record<string, string> {
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v)) flatten(x, prefix ? `${prefix}.${k}` : k, out);
  } else out[prefix] = JSON.stringify(v);
  return out;
}

/** One field where the two data planes observed different things. */
export interface Difference {
  /** `<scenario>/<request>/<field path>`. */
  where: string;
  engine: string | undefined;
  envoy: string | undefined;
}

/** Every leaf whose value differs between the two runs (a leaf missing on one side has `undefined` there). */
export function differences(scenario: string, engine: Record<string, Observation>, envoy: Record<string, Observation>): Difference[] {
  const out: Difference[] = [];
  for (const req of new Set([...Object.keys(engine), ...Object.keys(envoy)])) {
    const a = flatten(engine[req] ?? {});
    const b = flatten(envoy[req] ?? {});
    for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
      if (a[k] !== b[k]) out.push({ where: `${scenario}/${req}/${k}`, engine: a[k], envoy: b[k] });
    }
  }
  return out;
}

/**
 * A difference the README's table lists on purpose: `where` matches a Difference's `where`, where a request
 * name of `*` stands for every request of the scenario that shows it, and a value of ANY for any value there.
 */
export interface KnownDifference {
  where: string;
  engine: string | undefined;
  envoy: string | undefined;
}

/**
 * Runs `s` on our engine and on Envoy, checks that Envoy rejected no config, and that the two observed the same
 * except exactly the `known` differences of this scenario (each must still show, with the listed values).
 */
export async function compareScenario(t: Test, s: Scenario, known: readonly KnownDifference[]): Promise<void> {
  const runs: Partial<Record<DataPlane, Record<string, Observation>>> = {};
  for (const plane of ['engine', 'envoy'] as const) {
    await t.test(`${s.name} on ${plane}`, async (t) => {
      const run = await runScenario(t, s, plane);
      runs[plane] = run.observations;
      t.same(run.nacks, [], 'no config rejected');
    });
  }
  if (!runs.engine || !runs.envoy) return;
  // MESH_DIFF_DUMP=1: what the engine observed, to read a scenario's expectations against Envoy's docs
  if (process.env['MESH_DIFF_DUMP']) t.comment(JSON.stringify(runs.engine, null, 1));
  const found = differences(s.name, runs.engine, runs.envoy);
  const mine = known.filter((k) => k.where.startsWith(`${s.name}/`));
  const same = (listedValue: string | undefined, seen: string | undefined) => listedValue === ANY || listedValue === seen;
  const listed = (k: KnownDifference, d: Difference) => wherePattern(k.where).test(d.where) && same(k.engine, d.engine) && same(k.envoy, d.envoy);
  const unlisted = found.filter((d) => !mine.some((k) => listed(k, d)));
  const gone = mine.filter((k) => !found.some((d) => listed(k, d)));
  // one line per field, as the README's table would list it
  for (const d of unlisted) t.comment(`| \`${d.where}\` | ${cellOf(d.engine)} | ${cellOf(d.envoy)} |`);
  t.same(unlisted, [], `${s.name}: engine and Envoy observed the same, but for the README's listed differences`);
  t.same(gone, [], `${s.name}: every listed difference still shows (else remove its README row)`);
}

/** A listed value that matches any value (the README's cell `*`, unquoted). */
export const ANY = '*';

/** A value as a README table cell: JSON in backticks, or — for a field one side does not have. */
export function cellOf(v: string | undefined): string {
  return v === undefined ? '—' : `\`${v}\``;
}

/** `<scenario>/<request or *>/<field>` as a pattern over Difference.where. */
export function wherePattern(where: string): RegExp {
  const [scenario, request, ...field] = where.split('/');
  const esc = (x: string) => x.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${esc(scenario!)}/${request === '*' ? '[^/]+' : esc(request!)}/${esc(field.join('/'))}$`);
}
