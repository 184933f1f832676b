// Shared helpers for the daemon-shell tests: fake providers, a daemon on ephemeral loopback ports, HTTP
// requests with the peer address under control, polling with deadlines, and self-signed certificates.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import * as os from 'node:os';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { Config } from '../../src/config/types';
import type { Endpoint, Proxy, Service } from '../../src/discovery/model';
import { type Daemon, type DaemonOptions, startDaemon } from '../../src/meshd/daemon';
import type { ConfigDumpOptions, MeshdProviders, PushStatus, Readiness, ValidationResult, XdsConnectionInfo } from '../../src/meshd/providers';
import { signWith } from '../helpers/openssl';

/** A gRPC method the fake xDS server registers, to prove a listener serves gRPC. */
export const ECHO_METHOD = '/mesh.test.Echo/Echo';
/** A bidi stream that stays open until the fake xDS server's stop() ends it, like an ADS stream. */
export const HOLD_METHOD = '/mesh.test.Echo/Hold';
const passthrough = (b: Buffer) => b;

export class FakeXds {
  connections_: XdsConnectionInfo[] = [];
  attached: Array<{ secure: boolean }> = [];
  disconnected: string[] = [];
  dumps: Array<{ id: string; opts: ConfigDumpOptions }> = [];
  stopCalls: number[] = [];
  /** How long stop() takes; undefined = never resolves (stuck pushes). */
  stopDelayMs: number | undefined = 0;
  pushAll?: () => number;
  held = new Set<grpc.ServerDuplexStream<Buffer, Buffer>>();

  attach(server: grpc.Server, opts: { secure: boolean }): void {
    this.attached.push(opts);
    server.register(
      ECHO_METHOD,
      (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        const auth = call.getAuthContext();
        const tag = Buffer.from(`${opts.secure ? 'secure' : 'plain'}:${auth.sslPeerCertificate ? 'cert' : 'nocert'}:`);
        cb(null, Buffer.concat([tag, call.request]));
      },
      passthrough,
      passthrough,
      'unary',
    );
    server.register(
      HOLD_METHOD,
      (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
        this.held.add(call);
        call.on('data', (b: Buffer) => call.write(b));
        call.on('close', () => this.held.delete(call));
        call.on('error', () => this.held.delete(call));
      },
      passthrough,
      passthrough,
      'bidi',
    );
  }
  connections(): readonly XdsConnectionInfo[] {
    return this.connections_;
  }
  forceDisconnect(id: string): boolean {
    const before = this.connections_.length;
    this.connections_ = this.connections_.filter((c) => c.id !== id);
    if (this.connections_.length === before) return false;
    this.disconnected.push(id);
    return true;
  }
  stop(graceMs: number): Promise<void> {
    this.stopCalls.push(graceMs);
    if (this.stopDelayMs === undefined) return new Promise(() => {});
    // In-flight pushes finish, then every stream is ended, as the ADS server does.
    return new Promise((r) =>
      setTimeout(() => {
        for (const call of this.held) call.end();
        r();
      }, this.stopDelayMs),
    );
  }
  configDump(id: string, opts: ConfigDumpOptions): unknown {
    this.dumps.push({ id, opts });
    if (!this.connections_.some((c) => c.id === id)) return undefined;
    return { configs: [{ '@type': 'type.googleapis.com/envoy.admin.v3.BootstrapConfigDump' }] };
  }
}

export class FakeProviders implements MeshdProviders {
  syncState: Readiness = { ready: false, reason: 'config store: initial read of ./config not finished' };
  configList: Config[] = [];
  serviceList: Service[] = [];
  endpointList: Endpoint[] = [];
  status: PushStatus | undefined;
  xds = new FakeXds();
  validated: Array<Readonly<Record<string, unknown>>> = [];
  validation: (obj: Readonly<Record<string, unknown>>) => ValidationResult = () => ({ errors: [] });
  closed = false;
  authenticateDebug?: (req: http.IncomingMessage) => Promise<readonly string[] | undefined>;

  synced(): Readiness {
    return this.syncState;
  }
  configs(): readonly Config[] {
    return this.configList;
  }
  services(): readonly Service[] {
    return this.serviceList;
  }
  endpoints(): readonly Endpoint[] {
    return this.endpointList;
  }
  pushStatus(): PushStatus | undefined {
    return this.status;
  }
  validate(obj: Readonly<Record<string, unknown>>): ValidationResult {
    this.validated.push(obj);
    return this.validation(obj);
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

/** Options with every listener on 127.0.0.1 and an ephemeral port, and the flag defaults otherwise. */
export function loopbackOptions(overrides: Partial<DaemonOptions> = {}): DaemonOptions {
  return {
    grpcAddr: '127.0.0.1:0',
    secureGRPCAddr: '127.0.0.1:0',
    httpAddr: '127.0.0.1:0',
    httpsAddr: '127.0.0.1:0',
    monitoringAddr: '127.0.0.1:0',
    ctrlzAddress: '127.0.0.1',
    ctrlzPort: 0,
    grpc: {
      keepaliveIntervalMs: 30_000,
      keepaliveTimeoutMs: 10_000,
      maxServerConnectionAgeMs: 9_223_372_036_854,
      maxServerConnectionAgeGraceMs: 10_000,
      maxConcurrentStreams: 100_000,
      maxRecvMsgSize: 4_194_304,
    },
    tls: { certFile: '', keyFile: '', caCertFile: '', cipherSuites: [] },
    shutdownDurationMs: 10_000,
    profile: false,
    enableDebugOnHttp: true,
    unsafeAdminEndpoints: false,
    metricsLocalhostOnly: false,
    ...overrides,
  };
}

export async function startTestDaemon(
  t: { teardown(fn: () => unknown): void },
  overrides: Partial<DaemonOptions> = {},
  providers = new FakeProviders(),
): Promise<{ daemon: Daemon; providers: FakeProviders; url: (listener: 'http' | 'monitoring' | 'ctrlz', p: string) => string }> {
  const daemon = await startDaemon(loopbackOptions(overrides), providers);
  t.teardown(() => daemon.shutdown('test over'));
  const url = (listener: 'http' | 'monitoring' | 'ctrlz', p: string) => {
    const a = daemon.addresses[listener];
    if (!a) throw new Error(`listener ${listener} not started`);
    return `http://${a.address}${p}`;
  };
  return { daemon, providers, url };
}

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One HTTP(S) request; `localAddress` picks the client's source address (to appear as a remote peer). */
export function request(
  url: string,
  opts: { method?: string; body?: string; headers?: Record<string, string>; localAddress?: string; ca?: Buffer } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const mod = url.startsWith('https:') ? https : http;
    const req = mod.request(
      url,
      { method: opts.method ?? 'GET', headers: opts.headers, localAddress: opts.localAddress, ca: opts.ca, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

export async function getJSON(url: string): Promise<unknown> {
  const r = await request(url);
  if (r.status !== 200) throw new Error(`GET ${url}: ${r.status} ${r.body}`);
  return JSON.parse(r.body);
}

/** A non-loopback IPv4 address of this machine, to make requests that do not come from localhost. */
export function externalIPv4(): string | undefined {
  for (const addrs of Object.values(os.networkInterfaces())) {
    for (const a of addrs ?? []) if (!a.internal && a.family === 'IPv4') return a.address;
  }
  return undefined;
}

export interface CertSet {
  caCert: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** A client certificate from a different CA. */
  strangerCert: string;
  strangerKey: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A CA, a server certificate for localhost/127.0.0.1, a client certificate, and one from another CA. */
export function makeCerts(dir: string): CertSet {
  const ext = path.join(dir, 'server.ext');
  fs.writeFileSync(ext, 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  const clientExt = path.join(dir, 'client.ext');
  fs.writeFileSync(clientExt, 'extendedKeyUsage=clientAuth\nsubjectAltName=URI:spiffe://cluster.local/ns/default/sa/test\n');
  const ca = (name: string) => {
    openssl(
      ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', '2', '-subj', `/CN=${name}`],
      dir,
    );
  };
  const leaf = (name: string, caName: string, extFile: string) => {
    openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`], dir);
    openssl([...signWith(`${name}.csr`, `${caName}.crt`, `${caName}.key`), '-out', `${name}.crt`, '-days', '2', '-extfile', extFile], dir);
  };
  ca('ca');
  ca('other-ca');
  leaf('server', 'ca', ext);
  leaf('client', 'ca', clientExt);
  leaf('stranger', 'other-ca', clientExt);
  const p = (f: string) => path.join(dir, f);
  return {
    caCert: p('ca.crt'),
    serverCert: p('server.crt'),
    serverKey: p('server.key'),
    clientCert: p('client.crt'),
    clientKey: p('client.key'),
    strangerCert: p('stranger.crt'),
    strangerKey: p('stranger.key'),
  };
}

/** Calls the fake xDS server's echo method over a gRPC channel. */
export function echo(address: string, credentials: grpc.ChannelCredentials, payload: string, options: grpc.ClientOptions = {}): Promise<string> {
  const client = new grpc.Client(address, credentials, options);
  return new Promise<string>((resolve, reject) => {
    client.makeUnaryRequest(
      ECHO_METHOD,
      (b: Buffer) => b,
      (b: Buffer) => b,
      Buffer.from(payload),
      { deadline: Date.now() + 10_000 },
      (err, res) => {
        client.close();
        if (err) reject(err);
        else resolve((res as Buffer).toString());
      },
    );
  });
}

// ---- model fixtures -------------------------------------------------------------------------------------

export function service(over: Partial<Service> = {}): Service {
  return {
    hostname: 'reviews.default.svc.cluster.local',
    namespace: 'default',
    name: 'reviews',
    addresses: ['10.96.0.10'],
    ports: [{ name: 'http', port: 9080, protocol: 'HTTP' }],
    resolution: 'ClientSide',
    meshExternal: false,
    exportTo: ['*'],
    labels: { app: 'reviews' },
    registry: 'Orchestrator',
    clusterId: 'Orchestrator',
    creationTime: Date.UTC(2024, 0, 2, 3, 4, 5, 120),
    serviceAccounts: ['spiffe://cluster.local/ns/default/sa/reviews'],
    selector: { app: 'reviews' },
    ...over,
  };
}

export function endpoint(over: Partial<Endpoint> = {}): Endpoint {
  return {
    address: '10.0.0.7',
    port: 9080,
    servicePortName: 'http',
    hostname: 'reviews.default.svc.cluster.local',
    namespace: 'default',
    labels: { app: 'reviews', version: 'v1', 'security.istio.io/tlsMode': 'istio' },
    serviceAccount: 'spiffe://cluster.local/ns/default/sa/reviews',
    locality: 'us-east1/us-east1-b/',
    healthStatus: 'Healthy',
    workloadName: 'reviews-v1',
    ...over,
  };
}

export function proxy(over: Partial<Proxy> = {}): Proxy {
  return {
    nodeId: 'sidecar~10.0.0.7~reviews-v1-abc.default~default.svc.cluster.local',
    type: 'sidecar',
    ipAddresses: ['10.0.0.7'],
    id: 'reviews-v1-abc.default',
    namespace: 'default',
    dnsDomain: 'default.svc.cluster.local',
    metadata: {
      labels: { app: 'reviews' },
      namespace: 'default',
      clusterId: 'Orchestrator',
      meshVersion: '1.26.0',
      raw: { NAMESPACE: 'default', CLUSTER_ID: 'Orchestrator', ISTIO_VERSION: '1.26.0', LABELS: { app: 'reviews' } },
    },
    labels: { app: 'reviews' },
    proxyless: false,
    ...over,
  };
}

export function virtualService(name: string): Config<'VirtualService'> {
  return {
    kind: 'VirtualService',
    apiVersion: 'networking.istio.io/v1',
    meta: { name, namespace: 'default', labels: {}, annotations: {}, resourceVersion: '7', creationTimestamp: '2024-01-02T03:04:05Z' },
    spec: { hosts: ['reviews'], http: [{ route: [{ destination: { host: 'reviews' } }] }] } as Config<'VirtualService'>['spec'],
  };
}
