// The application health check of a workload outside the cluster (Istio's pkg/istio-agent/health): the
// WorkloadGroup's `probe`, which `meshctl x workload entry configure` writes as the ProxyConfig's
// readinessProbe, read with Istio's defaults (failure and success threshold 1, timeout 1 s, period 10 s,
// HTTP path `/`, scheme `http`), and the probers: HTTP GET (2xx/3xx healthy), TCP connect, a command, or the
// gRPC health protocol. The default host is the workload's first IP address, as Istio's agent probes it.
import { execFile } from 'node:child_process';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { joinHostPort } from '../../lib/hostport';

export interface HttpGet {
  path: string;
  port: number;
  host?: string;
  scheme: 'http' | 'https';
  httpHeaders: Array<{ name: string; value: string }>;
}

export type ProbeMethod =
  | { kind: 'httpGet'; httpGet: HttpGet }
  | { kind: 'tcpSocket'; tcpSocket: { host?: string; port: number } }
  | { kind: 'exec'; exec: { command: string[] } }
  | { kind: 'grpc'; grpc: { port: number; service: string } };

/** A ReadinessProbe with Istio's defaults filled in (fillInDefaults). */
export interface ReadinessProbe {
  initialDelayMs: number;
  timeoutMs: number;
  periodMs: number;
  successThreshold: number;
  failureThreshold: number;
  method: ProbeMethod;
}

export class ProbeConfigError extends Error {}

type Json = Record<string, unknown>;

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function int(o: Json, field: string, where: string, def: number): number {
  const v = o[field];
  if (v === undefined || v === null || v === 0) return def;
  const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0)
    throw new ProbeConfigError(`${where}.${field}: must be a non-negative integer, got ${JSON.stringify(v)}`);
  return n === 0 ? def : n;
}

function port(o: Json, where: string): number {
  const v = o['port'];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 65535)
    throw new ProbeConfigError(`${where}.port: must be a port number 1-65535, got ${JSON.stringify(v)}`);
  return v;
}

function optString(o: Json, field: string, where: string): string | undefined {
  const v = o[field];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new ProbeConfigError(`${where}.${field}: must be a string, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * The readinessProbe of a ProxyConfig (protojson), defaults filled in; undefined when there is none (no
 * health checking, as Istio's NewWorkloadHealthChecker returns nil).
 */
export function parseReadinessProbe(raw: unknown, where = 'readinessProbe'): ReadinessProbe | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!isObj(raw)) throw new ProbeConfigError(`${where}: must be an object, got ${JSON.stringify(raw)}`);
  const methods = (['httpGet', 'tcpSocket', 'exec', 'grpc'] as const).filter((m) => raw[m] !== undefined && raw[m] !== null);
  if (methods.length !== 1) {
    throw new ProbeConfigError(
      `${where}: exactly one of httpGet, tcpSocket, exec or grpc must be set, got ${methods.length ? methods.join(', ') : 'none'}`,
    );
  }
  const m = methods[0]!;
  const body = raw[m];
  const at = `${where}.${m}`;
  if (!isObj(body)) throw new ProbeConfigError(`${at}: must be an object`);
  let method: ProbeMethod;
  switch (m) {
    case 'httpGet': {
      const scheme = (optString(body, 'scheme', at) ?? 'http').toLowerCase();
      if (scheme !== 'http' && scheme !== 'https')
        throw new ProbeConfigError(`${at}.scheme: must be HTTP or HTTPS, got ${JSON.stringify(body['scheme'])}`);
      const headers = body['httpHeaders'] ?? [];
      if (!Array.isArray(headers) || !headers.every((h) => isObj(h) && typeof h['name'] === 'string' && typeof (h['value'] ?? '') === 'string')) {
        throw new ProbeConfigError(`${at}.httpHeaders: must be a list of {name, value}`);
      }
      const host = optString(body, 'host', at);
      method = {
        kind: 'httpGet',
        httpGet: {
          path: optString(body, 'path', at) ?? '/',
          port: port(body, at),
          ...(host ? { host } : {}),
          scheme,
          httpHeaders: (headers as Json[]).map((h) => ({ name: h['name'] as string, value: (h['value'] as string | undefined) ?? '' })),
        },
      };
      break;
    }
    case 'tcpSocket': {
      const host = optString(body, 'host', at);
      method = { kind: 'tcpSocket', tcpSocket: { port: port(body, at), ...(host ? { host } : {}) } };
      break;
    }
    case 'exec': {
      const cmd = body['command'];
      if (!Array.isArray(cmd) || cmd.length === 0 || !cmd.every((c) => typeof c === 'string'))
        throw new ProbeConfigError(`${at}.command: must be a non-empty list of strings`);
      method = { kind: 'exec', exec: { command: cmd as string[] } };
      break;
    }
    case 'grpc':
      method = { kind: 'grpc', grpc: { port: port(body, at), service: optString(body, 'service', at) ?? '' } };
      break;
  }
  return {
    initialDelayMs: int(raw, 'initialDelaySeconds', where, 0) * 1000,
    timeoutMs: int(raw, 'timeoutSeconds', where, 1) * 1000,
    periodMs: int(raw, 'periodSeconds', where, 10) * 1000,
    successThreshold: int(raw, 'successThreshold', where, 1),
    failureThreshold: int(raw, 'failureThreshold', where, 1),
    method,
  };
}

/** Go's dial error text for the common causes, so messages read as Istio's agent writes them. */
function dialError(hostPort: string, e: NodeJS.ErrnoException): string {
  switch (e.code) {
    case 'ECONNREFUSED':
      return `dial tcp ${hostPort}: connect: connection refused`;
    case 'EHOSTUNREACH':
      return `dial tcp ${hostPort}: connect: no route to host`;
    case 'ENETUNREACH':
      return `dial tcp ${hostPort}: connect: network is unreachable`;
    case 'ETIMEDOUT':
      return `dial tcp ${hostPort}: i/o timeout`;
    default:
      return `dial tcp ${hostPort}: ${e.message}`;
  }
}

/** One probe: undefined when healthy, else why not (Istio's ProbeEvent.UnhealthyMessage). */
export type Prober = (timeoutMs: number) => Promise<string | undefined>;

export function httpProber(c: HttpGet, defaultHost: string): Prober {
  const hostPort = joinHostPort(c.host ?? defaultHost, c.port);
  const url = `${c.scheme}://${hostPort}${c.path.startsWith('/') ? '' : '/'}${c.path}`;
  return (timeoutMs) =>
    new Promise((resolve) => {
      const headers: Record<string, string | string[]> = {};
      for (const h of c.httpHeaders) {
        const cur = headers[h.name];
        headers[h.name] = cur === undefined ? h.value : [...(Array.isArray(cur) ? cur : [cur]), h.value];
      }
      if (!Object.keys(headers).some((k) => k.toLowerCase() === 'user-agent')) headers['User-Agent'] = 'istio-probe/1.0';
      const lib = c.scheme === 'https' ? https : http;
      let done = false;
      const finish = (r: string | undefined): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve(r);
      };
      const req = lib.get(url, { headers, agent: false, ...(c.scheme === 'https' ? { rejectUnauthorized: false } : {}) }, (res) => {
        res.resume();
        const code = res.statusCode ?? 0;
        finish(code >= 200 && code < 400 ? undefined : `status code was not from [200,400), bad code ${code}`);
      });
      const timer = setTimeout(() => {
        req.destroy();
        finish(`Get "${url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`);
      }, timeoutMs);
      req.on('error', (e: NodeJS.ErrnoException) => finish(`Get "${url}": ${e.code ? dialError(hostPort, e) : e.message}`));
    });
}

export function tcpProber(c: { host?: string; port: number }, defaultHost: string): Prober {
  const host = c.host ?? defaultHost;
  const hostPort = joinHostPort(host, c.port);
  return (timeoutMs) =>
    new Promise((resolve) => {
      const s = net.connect({ host, port: c.port });
      const timer = setTimeout(() => {
        s.destroy();
        resolve(`dial tcp ${hostPort}: i/o timeout`);
      }, timeoutMs);
      s.once('connect', () => {
        clearTimeout(timer);
        s.destroy();
        resolve(undefined);
      });
      s.once('error', (e: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        resolve(dialError(hostPort, e));
      });
    });
}

export function execProber(c: { command: string[] }): Prober {
  return (timeoutMs) =>
    new Promise((resolve) => {
      execFile(c.command[0]!, c.command.slice(1), { timeout: timeoutMs, killSignal: 'SIGKILL' }, (err) => {
        if (!err) return resolve(undefined);
        const e = err as NodeJS.ErrnoException & { killed?: boolean; code?: number | string; signal?: string };
        if (e.killed) return resolve(`command timeout exceeded: signal: killed`);
        if (typeof e.code === 'number') return resolve(`exit status ${e.code}`);
        if (e.code === 'ENOENT') return resolve(`exec: "${c.command[0]}": executable file not found in $PATH`);
        resolve(e.message);
      });
    });
}

// grpc.health.v1.Health/Check, encoded by hand: HealthCheckRequest{service = 1}, HealthCheckResponse{status = 1}.
function encodeHealthRequest(service: string): Buffer {
  const s = Buffer.from(service, 'utf8');
  if (s.length === 0) return Buffer.alloc(0);
  const len: number[] = [];
  let n = s.length;
  while (n > 0x7f) {
    len.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  len.push(n);
  return Buffer.concat([Buffer.from([0x0a, ...len]), s]);
}

function decodeHealthStatus(b: Buffer): number {
  let i = 0;
  let status = 0;
  while (i < b.length) {
    const tag = b[i++]!;
    if (tag === 0x08) {
      let v = 0;
      let shift = 0;
      for (;;) {
        const x = b[i++]!;
        v |= (x & 0x7f) << shift;
        if (!(x & 0x80)) break;
        shift += 7;
      }
      status = v;
    } else break; // unknown field: the status is all we read
  }
  return status;
}

const SERVING = 1;

export function grpcProber(c: { port: number; service: string }, defaultHost: string): Prober {
  const target = joinHostPort(defaultHost, c.port);
  return (timeoutMs) =>
    new Promise((resolve) => {
      const client = new grpc.Client(target, grpc.credentials.createInsecure(), { 'grpc.primary_user_agent': 'istio-probe/1.0' });
      const deadline = new Date(Date.now() + timeoutMs);
      client.makeUnaryRequest(
        '/grpc.health.v1.Health/Check',
        (s: string) => encodeHealthRequest(s),
        (b: Buffer) => decodeHealthStatus(b),
        c.service,
        new grpc.Metadata(),
        { deadline },
        (err, status) => {
          client.close();
          if (err) {
            if (err.code === grpc.status.UNIMPLEMENTED) {
              resolve(`service on port ${c.port} doesn't implement the grpc health protocol grpc.health.v1.Health: ${err.message}`);
            } else if (err.code === grpc.status.DEADLINE_EXCEEDED) {
              resolve(`health rpc probe timed out after ${timeoutMs / 1000}s: ${err.message}`);
            } else if (err.code === grpc.status.UNAVAILABLE) {
              resolve(`failed to connect health check grpc service on port ${c.port}: ${err.details}`);
            } else {
              resolve(`health rpc probe failed with status ${grpc.status[err.code]}: ${err.message}`);
            }
            return;
          }
          resolve(status === SERVING ? undefined : `health rpc probe answered status ${status}`);
        },
      );
    });
}

/** The prober of a probe, against `defaultHost` when the probe names no host. */
export function proberFor(m: ProbeMethod, defaultHost: string): Prober {
  switch (m.kind) {
    case 'httpGet':
      return httpProber(m.httpGet, defaultHost);
    case 'tcpSocket':
      return tcpProber(m.tcpSocket, defaultHost);
    case 'exec':
      return execProber(m.exec);
    case 'grpc':
      return grpcProber(m.grpc, defaultHost);
  }
}

/** Istio's AggregateProber: every prober in order; the first failure is the answer. */
export function aggregate(probers: readonly Prober[]): Prober {
  return async (timeoutMs) => {
    for (const p of probers) {
      const r = await p(timeoutMs);
      if (r !== undefined) return r;
    }
    return undefined;
  };
}
