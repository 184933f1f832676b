// The agent's SDS server (Istio's sdsservice): envoy.service.secret.v3.SecretDiscoveryService on a Unix socket
// (./var/run/secrets/workload-spiffe-uds/socket), the `sds-grpc` cluster of the proxy's bootstrap. A stream
// answers each newly requested name once the secret is there, pushes a secret again whenever it changes
// (rotation, a rewritten file), and stays quiet on ACKs. FetchSecrets answers once with what was asked for.
// DeltaSecrets is not offered (UNIMPLEMENTED, as in Istio).
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import { anyPack } from '@bufbuild/protobuf/wkt';
import { DiscoveryResponseSchema, type DiscoveryRequest, type DiscoveryResponse } from '../../gen/envoy/service/discovery/v3/discovery_pb';
import { SecretSchema, type Secret } from '../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { SecretDiscoveryService } from '../../gen/envoy/service/secret/v3/sds_pb';
import { registerScope } from '../../lib/log';
import { addGrpcService } from '../../lib/xds/grpc';
import type { SecretItem, WorkloadSecrets } from './secrets';
import { UNGUARDED, type Guard } from '../boundary';
import { expiredNonce, incrementXdsRejects, sendTime, totalXdsInternalErrors } from '../../xds/server/stream-metrics';
import { grpcCodeName, metricType, TYPE_URL } from '../../lib/xds/type-urls';

const log = registerScope('sds', 'SDS service debugging');

/** How long FetchSecrets waits for a secret that is not there yet. */
const FETCH_WAIT_MS = 10_000;

/** Istio's toEnvoySecret: a validation context for roots, a certificate and key otherwise. */
export function toEnvoySecret(item: SecretItem): Secret {
  if (item.rootCert && !item.certificateChain) {
    return create(SecretSchema, {
      name: item.name,
      type: { case: 'validationContext', value: { trustedCa: { specifier: { case: 'inlineBytes', value: item.rootCert } } } },
    });
  }
  return create(SecretSchema, {
    name: item.name,
    type: {
      case: 'tlsCertificate',
      value: {
        certificateChain: { specifier: { case: 'inlineBytes', value: item.certificateChain! } },
        privateKey: { specifier: { case: 'inlineBytes', value: item.privateKey! } },
      },
    },
  });
}

let version = 0;

function fingerprint(i: SecretItem): string {
  return [i.certificateChain, i.privateKey, i.rootCert].map((b) => b?.toString('base64') ?? '').join('|');
}

function response(items: SecretItem[]): DiscoveryResponse {
  return create(DiscoveryResponseSchema, {
    typeUrl: TYPE_URL.secret,
    versionInfo: `${new Date().toISOString()}/${++version}`,
    nonce: randomUUID(),
    resources: items.map((i) => anyPack(SecretSchema, toEnvoySecret(i))),
  });
}

let streamNumber = 0;

class SdsStream {
  readonly id = ++streamNumber;
  private names = new Set<string>();
  private lastNonce = '';
  private nodeId = '';
  /** What was last sent of each secret, so a change and a pending first answer do not both send it. */
  private readonly sent = new Map<string, string>();
  private closed = false;
  private readonly pending = new AbortController();

  constructor(
    private readonly server: SdsServer,
    private readonly call: grpc.ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>,
  ) {
    // A fault while handling a request ends this stream; the proxy asks again on a new one.
    call.on(
      'data',
      server.guard.entry(
        'sds',
        (req: DiscoveryRequest) => this.onRequest(req),
        () => this.close(),
      ),
    );
    call.on('end', () => this.close());
    call.on('cancelled', () => this.close());
    call.on('error', (e: grpc.ServiceError) => {
      // Istio's pkg/xds Receive: a stream that fails other than by the proxy going away is an internal error
      if (e.code !== grpc.status.CANCELLED && e.code !== grpc.status.DEADLINE_EXCEEDED && e.code !== grpc.status.UNAVAILABLE)
        totalXdsInternalErrors.inc();
      this.close();
    });
  }

  private onRequest(req: DiscoveryRequest): void {
    if (req.typeUrl && req.typeUrl !== TYPE_URL.secret) {
      log.warn(`SDS stream ${this.id}: ignoring a request for type ${req.typeUrl}`);
      return;
    }
    if (req.node?.id) this.nodeId = req.node.id;
    // Istio's pkg/xds ShouldRespond, which the SDS server uses: a NACK is counted before the nonce is looked at
    if (req.errorDetail) {
      log.warn(`SDS stream ${this.id}: the proxy rejected secrets [${req.resourceNames.join(', ')}]: ${req.errorDetail.message}`);
      incrementXdsRejects(TYPE_URL.secret, this.nodeId, grpcCodeName(req.errorDetail.code));
    }
    if (req.responseNonce && req.responseNonce !== this.lastNonce) {
      log.debug(`SDS stream ${this.id}: stale nonce ${req.responseNonce} ignored`);
      expiredNonce.inc({ type: metricType(TYPE_URL.secret) });
      return;
    }
    const added = req.resourceNames.filter((n) => !this.names.has(n));
    this.names = new Set(req.resourceNames);
    for (const n of [...this.sent.keys()]) if (!this.names.has(n)) this.sent.delete(n);
    for (const name of added) void this.sendWhenAvailable(name);
  }

  private async sendWhenAvailable(name: string): Promise<void> {
    const secrets = this.server.secrets;
    if (!secrets.serves(name)) {
      log.warn(
        `SDS stream ${this.id}: secret ${JSON.stringify(name)} is not served by the agent (it serves default, ROOTCA, file-cert:<chain>~<key> and file-root:<ca>)`,
      );
      return;
    }
    let item: SecretItem;
    try {
      item = await secrets.whenAvailable(name, this.pending.signal);
    } catch (e) {
      if (!this.closed) log.error(`SDS stream ${this.id}: failed to generate secret for ${name}: ${(e as Error).message}`);
      return;
    }
    if (this.closed || !this.names.has(name)) return;
    this.send([item]);
  }

  /** A secret changed: push it when this stream asked for it. */
  changed(name: string): void {
    if (!this.names.has(name)) return;
    let item: SecretItem | undefined;
    try {
      item = this.server.secrets.get(name);
    } catch (e) {
      log.error(`SDS stream ${this.id}: failed to generate secret for ${name}: ${(e as Error).message}`);
      return;
    }
    if (item) this.send([item]);
  }

  private send(all: SecretItem[]): void {
    const items = all.filter((i) => this.sent.get(i.name) !== fingerprint(i));
    if (items.length === 0) return;
    for (const i of items) this.sent.set(i.name, fingerprint(i));
    const r = response(items);
    this.lastNonce = r.nonce;
    log.info(`SDS: PUSH for ${items.map((i) => i.name).join(', ')}`, { stream: this.id, version: r.versionInfo });
    const start = process.hrtime.bigint();
    this.call.write(r, () => sendTime.observe(Number(process.hrtime.bigint() - start) / 1e9));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.pending.abort();
    this.server.forget(this);
    try {
      this.call.end();
    } catch {
      // already ended
    }
  }
}

export class SdsServer {
  private server: grpc.Server | undefined;
  private readonly streams = new Set<SdsStream>();
  private unsubscribe: (() => void) | undefined;
  readonly socketPath: string;

  constructor(
    socketPath: string,
    readonly secrets: WorkloadSecrets,
    readonly guard: Guard = UNGUARDED,
  ) {
    this.socketPath = path.resolve(socketPath);
  }

  async start(): Promise<void> {
    fs.mkdirSync(path.dirname(this.socketPath), { recursive: true, mode: 0o750 });
    try {
      fs.unlinkSync(this.socketPath);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
        throw new Error(`failed to remove stale SDS socket ${this.socketPath}: ${(e as Error).message}`);
    }
    const server = new grpc.Server({ 'grpc.max_concurrent_streams': 100_000 });
    addGrpcService(server, SecretDiscoveryService, {
      streamSecrets: this.guard.entry(
        'sds',
        (call) => {
          const s = new SdsStream(this, call);
          this.streams.add(s);
        },
        (_e, call) => call.end(),
      ),
      fetchSecrets: this.guard.entry(
        'sds',
        (call, callback) =>
          this.fetch(call.request).then(
            (r) => callback(null, r),
            (e: Error) => callback({ code: grpc.status.UNAVAILABLE, details: e.message }),
          ),
        async (e, _call, callback) => callback({ code: grpc.status.INTERNAL, details: e.message }),
      ),
    });
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix:${this.socketPath}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())),
    ).catch((e: Error) => {
      throw new Error(`failed to start the SDS server: listen unix ${this.socketPath}: ${e.message}`);
    });
    this.server = server;
    this.unsubscribe = this.secrets.onUpdate(
      this.guard.entry(
        'sds',
        (name: string) => {
          for (const s of this.streams) s.changed(name);
        },
        () => undefined,
      ),
    );
    log.info(`Starting SDS server for workload certificates, will listen on ${JSON.stringify(this.socketPath)}`);
  }

  private async fetch(req: DiscoveryRequest): Promise<DiscoveryResponse> {
    const signal = AbortSignal.timeout(FETCH_WAIT_MS);
    const items: SecretItem[] = [];
    for (const name of req.resourceNames) {
      if (!this.secrets.serves(name)) throw new Error(`secret ${JSON.stringify(name)} is not served by the agent`);
      items.push(
        await this.secrets.whenAvailable(name, signal).catch((e: Error) => {
          throw new Error(`secret ${name} is not available: ${signal.aborted ? `none after ${FETCH_WAIT_MS}ms` : e.message}`);
        }),
      );
    }
    return response(items);
  }

  forget(s: SdsStream): void {
    this.streams.delete(s);
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    for (const s of [...this.streams]) s.close();
    this.server?.forceShutdown();
    this.server = undefined;
    try {
      fs.unlinkSync(this.socketPath);
    } catch {
      // gone already
    }
  }
}
