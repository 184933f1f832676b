// The running agent (Istio's istio-agent Agent + envoy.Agent): the xDS proxy, the status server and the
// data-plane proxy process, and the ways the whole thing ends:
//  1. the proxy exits by itself: the agent exits with its status;
//  2. /quitquitquit: the proxy is stopped at once;
//  3. SIGTERM: graceful drain of listeners (inbound only for sidecars), then terminationDrainDuration — or,
//     with EXIT_ON_ZERO_ACTIVE_CONNECTIONS, MINIMUM_DRAIN_DURATION and then a check of the proxy's active
//     downstream connections every second until none is left — then the proxy is stopped;
//  4. /drain, then SIGTERM: the drain already happened, so SIGTERM stops the proxy at once.
import * as fs from 'node:fs';
import path from 'node:path';
import type { JsonObject } from '@bufbuild/protobuf';
import { registerScope } from '../lib/log';
import type { NodeType } from './config';
import { AdminClient } from './admin-client';
import { ProxyReadiness } from './readiness';
import { WorkloadHealthChecker } from './health/checker';
import type { ReadinessProbe } from './health/probe';
import { StatusServer } from './status';
import { startupDuration } from './metrics';
import { recordComponentBuildTag } from '../lib/build-metric';
import { exitStatus, proxyFor, type Proxy, type ProxyLaunch } from './process';
import { XdsProxy, type XdsProxyOptions } from './xds-proxy';
import { TYPE_URL } from '../lib/xds/type-urls';
import { WorkloadIdentity } from './identity';
import type { IdentityOptions } from './identity/options';
import { fromBinary } from '@bufbuild/protobuf';
import { NameTableSchema } from '../gen/istio/networking/nds/v1/nds_pb';
import { LocalDnsServer, type LocalDnsServerOptions } from '../dns/server';
import { decodeMessage, encodeMessage, RCODE, replyTo } from '../dns/wire';
import { FaultBoundary } from './boundary';
import type { AppScrapeConfig } from './metrics-merge';

const log = registerScope('default');

/** How long the proxy gets between SIGTERM and SIGKILL when the agent stops it. */
export const PROXY_STOP_GRACE_MS = 5000;
/** How long the first xDS connection waits for a workload certificate to present before going without. */
const FIRST_CERTIFICATE_WAIT_MS = 5000;
const ACTIVE_CONNECTION_CHECK_MS = 1000;
const ACTIVE_CONNECTION_MAX_RETRIES = 5;

export interface AgentOptions {
  nodeType: NodeType;
  /** Where the bootstrap is written (removed again when the proxy ends); undefined with a custom file. */
  bootstrap?: { path: string; json: JsonObject };
  /** How the proxy is run; undefined runs without a proxy (DISABLE_PROXY). */
  proxyLaunch?: ProxyLaunch;
  proxyEnv: NodeJS.ProcessEnv;
  cwd: string;
  xds: XdsProxyOptions;
  /** 127.0.0.1, or ::1 for an IPv6-only node (the bootstrap's admin address). */
  adminHost: string;
  adminPort: number;
  /** The status port; undefined leaves the status server off. */
  statusPort?: number;
  statusHost?: string;
  terminationDrainDurationMs: number;
  exitOnZeroActiveConnections: boolean;
  minimumDrainDurationMs: number;
  /** `listener.*.downstream_cx_active` stats of the agent's own listeners. */
  knownListeners: ReadonlySet<string>;
  /**
   * The local DNS proxy (DNS capture on a sidecar, or MESH_META_ENABLE_DNS_SERVER): served from the name table
   * the discovery daemon sends; readiness waits for the first one. Undefined: no DNS proxy.
   */
  dns?: LocalDnsServerOptions;
  metricsLocalhostOnly: boolean;
  /** The proxy's Prometheus listener (PROXY_METRICS_PORT), which the status server's merge scrapes. */
  proxyStatsPort?: number;
  /** The application's metrics endpoint merged into /stats/prometheus (MESH_METRICS_ANNOTATIONS, sidecars). */
  appMetrics?: AppScrapeConfig;
  /** The workload identity: certificates, their rotation and the SDS server; undefined runs without. */
  identity?: IdentityOptions;
  /** That identity already begun by the caller (see proxy-command: the certificate is asked for first). */
  workloadIdentity?: WorkloadIdentity;
  /** Where to write the gRPC xDS bootstrap (GRPC_XDS_BOOTSTRAP), with its content. */
  grpcBootstrap?: { path: string; json: JsonObject };
  stopGraceMs?: number;
  activeConnectionCheckMs?: number;
  /**
   * The application health check (ProxyConfig readinessProbe, as a WorkloadGroup's probe is configured on a
   * workload outside the cluster), probed at the workload's first IP address; its reports go to the daemon.
   */
  healthCheck?: { probe: ReadinessProbe; ipAddresses: readonly string[] };
  /** The fault boundary the side subsystems run behind (see boundary.ts); the caller installs its last line. */
  boundary?: FaultBoundary;
}

type Shutdown = { kind: 'terminate' } | { kind: 'quit' };

export class Agent {
  readonly xds: XdsProxy;
  readonly identity: WorkloadIdentity | undefined;
  readonly admin: AdminClient;
  readonly readiness: ProxyReadiness;
  readonly dns: LocalDnsServer | undefined;
  private status: StatusServer | undefined;
  private proxy: Proxy | undefined;
  private statusPortBound: number | undefined;
  private skipDrain = false;
  private shutdown: Shutdown | undefined;
  private wake: (() => void) | undefined;
  private readonly shutdownRequested: Promise<void>;
  private healthChecker: WorkloadHealthChecker | undefined;
  readonly boundary: FaultBoundary;

  constructor(private readonly o: AgentOptions) {
    this.boundary = o.boundary ?? new FaultBoundary();
    const handlers = new Map(o.xds.handlers ?? []);
    // Istio starts the DNS proxy when the agent is made: a bad resolv.conf or address fails the start.
    const dns = o.dns ? new LocalDnsServer(o.dns) : undefined;
    this.dns = dns;
    if (dns) {
      // serve() is the DNS proxy's one entry point per query (its UDP and TCP handlers call it); a query
      // that faults is answered SERVFAIL, as one the proxy could not resolve.
      dns.serve = this.boundary.entry('dns', dns.serve.bind(dns), async (_e, _protocol, buf) => {
        try {
          return encodeMessage(replyTo(decodeMessage(buf), RCODE.SERVFAIL));
        } catch {
          return undefined;
        }
      });
    }
    if (dns) {
      handlers.set(TYPE_URL.nameTable, (any) => {
        if (any.typeUrl !== TYPE_URL.nameTable) return `name table response holds ${any.typeUrl}`;
        try {
          dns.updateNameTable(fromBinary(NameTableSchema, any.value).table);
        } catch (e) {
          log.error(`failed to unmarshal name table: ${(e as Error).message}`);
          return `failed to unmarshal name table: ${(e as Error).message}`;
        }
        return undefined;
      });
    }
    this.identity =
      o.workloadIdentity ??
      (o.identity
        ? new WorkloadIdentity({ options: o.identity, cwd: o.cwd, serveSds: o.proxyLaunch !== undefined, guard: this.boundary })
        : undefined);
    let upstream = o.xds.upstream;
    const identity = this.identity;
    if (identity) {
      upstream = {
        ...upstream,
        credentials: identity.tokens,
        tls: upstream.tls && {
          ...upstream.tls,
          clientCertificate: () => identity.clientCertificate(),
          clientCertificateReady: () => identity.certificateOrTimeout(FIRST_CERTIFICATE_WAIT_MS),
        },
      };
    }
    this.xds = new XdsProxy({ ...o.xds, upstream, handlers, guard: this.boundary });
    this.admin = new AdminClient(o.adminHost, o.adminPort);
    this.readiness = new ProxyReadiness({
      admin: this.admin,
      nodeType: o.nodeType,
      noProxy: o.proxyLaunch === undefined,
      nameTableReady: dns ? () => dns.ready() : undefined,
      identityNotReady: identity ? () => identity.notReadyReason() : undefined,
      onFirstReady: () => startupDuration.set(process.uptime()),
    });
    this.shutdownRequested = new Promise((resolve) => (this.wake = resolve));
  }

  /** The status server's port once started. */
  get statusPort(): number | undefined {
    return this.statusPortBound;
  }

  /** Starts everything; rejects (after cleaning up) when a part cannot start. */
  async start(): Promise<void> {
    // the spec lists mesh_build for the agent too (Istio's agent links istio_build but never sets it)
    recordComponentBuildTag('pilot-agent');
    const b = this.boundary;
    try {
      // Each subsystem starts (and restarts) in its own context: what it makes carries its name.
      const identity = this.identity;
      await b.run('sds', () => identity?.start());
      if (identity) b.register('sds', { restart: () => identity.restartSds(), disable: () => identity.stopSds() });
      const dns = this.dns;
      if (dns) {
        try {
          await b.run('dns', () => dns.start());
        } catch (e) {
          throw new Error(`failed to start local DNS server: ${(e as Error).message}`);
        }
        // the name table stays: readiness (Istio's: the table arrived once) is not taken back
        b.register('dns', { restart: async () => (await dns.close(), await dns.start()), disable: () => dns.close() });
      }
      await b.run('xds-proxy', () => this.xds.start());
      // the proxy keeps its configuration while its stream is down, and reconnects
      b.register('xds-proxy', { restart: async () => (await this.xds.stop(), await this.xds.start()), disable: () => this.xds.stop() });
      const healthCheck = this.o.healthCheck;
      if (healthCheck) {
        // Istio's EnvoyProber first: a workload whose proxy is not ready is not healthy.
        const proxyReady = this.o.proxyLaunch
          ? () =>
              this.readiness.check().then(
                () => undefined,
                (e: Error) => e.message,
              )
          : undefined;
        const startChecker = () => {
          this.healthChecker?.stop();
          this.healthChecker = new WorkloadHealthChecker(healthCheck.probe, {
            ipAddresses: healthCheck.ipAddresses,
            guard: b,
            ...(proxyReady ? { proxyReady } : {}),
          });
          this.healthChecker.start((e) => this.xds.reportHealth(e));
        };
        b.run('health', startChecker);
        b.register('health', { restart: async () => startChecker(), disable: async () => this.healthChecker?.stop() });
      }
      if (this.o.grpcBootstrap) writeAtomically(this.o.grpcBootstrap.path, JSON.stringify(this.o.grpcBootstrap.json, null, '  '));
      if (this.o.statusPort !== undefined) {
        const status = new StatusServer({
          port: this.o.statusPort,
          host: this.o.statusHost,
          readiness: this.readiness,
          admin: this.o.proxyLaunch ? this.admin : undefined,
          onQuit: () => this.quit(),
          onDrain: () => void this.drainNow(),
          metricsLocalhostOnly: this.o.metricsLocalhostOnly,
          proxyStatsPort: this.o.proxyStatsPort,
          app: this.o.appMetrics,
          guard: b,
        });
        this.status = status;
        this.statusPortBound = await b.run('status', () => status.start());
        // kubelet probes it: never disabled, restarted on the same port
        b.register('status', {
          essential: true,
          restart: async () => (await status.stop(), void (await status.start())),
          disable: () => status.stop(),
        });
        // The merge keeps no state: each scrape starts afresh. Never disabled (Istio scrapes on after failures).
        b.register('metrics', { essential: true, restart: async () => undefined, disable: async () => undefined });
      }
      if (this.o.proxyLaunch) {
        if (this.o.bootstrap) writeAtomically(this.o.bootstrap.path, JSON.stringify(this.o.bootstrap.json, null, '  '));
        this.proxy = proxyFor(this.o.proxyLaunch, { env: this.o.proxyEnv, cwd: this.o.cwd });
        log.info(`Proxy command: ${this.proxy.description}`);
        await this.proxy.start();
      }
    } catch (e) {
      await this.cleanup();
      throw e;
    }
  }

  /** SIGTERM: graceful termination (or immediate, when /drain already drained). */
  terminate(): void {
    this.request({ kind: 'terminate' });
  }

  /** /quitquitquit: stop now. */
  quit(): void {
    this.request({ kind: 'quit' });
  }

  private request(s: Shutdown): void {
    if (this.shutdown) {
      // A quit while a graceful termination is under way cuts it short.
      if (s.kind === 'quit' && this.shutdown.kind === 'terminate') this.shutdown = s;
      this.wakeWaits();
      return;
    }
    this.shutdown = s;
    this.readiness.terminate(s.kind === 'quit' ? '/quitquitquit called' : 'SIGTERM received');
    this.wake?.();
  }

  private interrupt: (() => void) | undefined;
  private wakeWaits(): void {
    this.interrupt?.();
  }

  /** /drain: drain the listeners now (for native sidecars); a later SIGTERM then exits at once. */
  async drainNow(): Promise<void> {
    log.info('Agent draining proxy');
    this.readiness.terminate('/drain called');
    this.skipDrain = true;
    if (!this.proxy) return;
    try {
      await this.admin.drainListeners(this.o.nodeType === 'sidecar', true);
    } catch (e) {
      log.warn(`Error in invoking drain listeners endpoint: ${(e as Error).message}`);
    }
  }

  /** Runs until the agent is done; resolves with the process exit code. */
  async run(): Promise<number> {
    let code = 0;
    if (this.proxy) {
      const exited = this.proxy.exited.then((e) => ({ exited: e }));
      const first = await Promise.race([exited, this.shutdownRequested.then(() => ({ exited: undefined }))]);
      if (first.exited) {
        code = exitStatus(first.exited);
        if (code === 0) log.info('Envoy exited normally');
        else log.error(`Envoy exited with error: ${first.exited.code !== null ? `exit status ${code}` : `signal: ${first.exited.signal}`}`);
      } else {
        await this.terminateProxy();
        log.info('Agent has successfully terminated');
      }
    } else {
      await this.shutdownRequested;
      log.info('Agent has successfully terminated');
    }
    await this.cleanup();
    return code;
  }

  private async terminateProxy(): Promise<void> {
    const proxy = this.proxy!;
    const graceMs = this.o.stopGraceMs ?? PROXY_STOP_GRACE_MS;
    if (this.shutdown?.kind === 'quit' || this.skipDrain) {
      log.info(this.skipDrain ? 'Agent already drained, exiting immediately' : 'Agent stopping the proxy at once (/quitquitquit)');
      await proxy.stop(graceMs);
      return;
    }
    log.info('Agent draining Proxy for termination');
    try {
      await this.admin.drainListeners(this.o.nodeType === 'sidecar', false);
    } catch (e) {
      log.warn(`Error in invoking drain listeners endpoint: ${(e as Error).message}`);
    }
    if (this.o.exitOnZeroActiveConnections) {
      log.info(`Agent draining proxy for ${this.o.minimumDrainDurationMs}ms, then waiting for active connections to terminate...`);
      if (await this.sleepUnlessProxyExits(this.o.minimumDrainDurationMs)) return;
      log.info('Checking for active connections...');
      let retries = 0;
      for (;;) {
        if (await this.sleepUnlessProxyExits(this.o.activeConnectionCheckMs ?? ACTIVE_CONNECTION_CHECK_MS)) return;
        let active: number;
        try {
          const r = await this.admin.activeConnections(this.o.knownListeners);
          for (const w of r.warnings) log.warn(w);
          active = r.active;
        } catch (e) {
          log.error(`unable to get listener stats from Envoy: ${(e as Error).message}`);
          if (++retries > ACTIVE_CONNECTION_MAX_RETRIES - 1) {
            log.warn(`Graceful termination logic ended prematurely, error while obtaining downstream_cx_active stat (Max retry ${retries} exceeded)`);
            break;
          }
          log.warn(`Retrying (${retries} attempt) to obtain active connections...`);
          continue;
        }
        if (active === -1) {
          log.info(
            'downstream_cx_active are not available. This either means there are no downstream connection established yet or the stats are not enabled. Skipping active connections check...',
          );
          break;
        }
        if (active === 0) {
          log.info('There are no more active connections. terminating proxy...');
          break;
        }
        log.info(`There are still ${active} active connections`);
        retries = 0;
      }
    } else {
      log.info(`Graceful termination period is ${this.o.terminationDrainDurationMs}ms, starting...`);
      if (await this.sleepUnlessProxyExits(this.o.terminationDrainDurationMs)) return;
      log.info('Graceful termination period complete, terminating remaining proxies.');
    }
    const e = await proxy.stop(graceMs);
    log.info(e.signal === 'SIGKILL' ? 'Envoy did not stop after SIGTERM and was killed' : 'Envoy aborted normally');
  }

  /** Sleeps; true when the proxy exited meanwhile (then there is nothing left to wait for). */
  private async sleepUnlessProxyExits(ms: number): Promise<boolean> {
    if (this.quitRequested()) {
      await this.proxy!.stop(this.o.stopGraceMs ?? PROXY_STOP_GRACE_MS);
      return true;
    }
    let timer: NodeJS.Timeout | undefined;
    const slept = new Promise<'slept'>((resolve) => {
      timer = setTimeout(() => resolve('slept'), ms);
      this.interrupt = () => resolve('slept');
    });
    const r = await Promise.race([slept, this.proxy!.exited.then(() => 'exited' as const)]);
    clearTimeout(timer);
    this.interrupt = undefined;
    if (r === 'exited') {
      log.info('Graceful termination logic ended prematurely, envoy process terminated early');
      return true;
    }
    // A /quitquitquit during the wait ends it.
    if (!this.quitRequested()) return false;
    await this.proxy!.stop(this.o.stopGraceMs ?? PROXY_STOP_GRACE_MS);
    return true;
  }

  /** Read through a method: a quit can arrive while the termination awaits. */
  private quitRequested(): boolean {
    return this.shutdown?.kind === 'quit';
  }

  private async cleanup(): Promise<void> {
    this.boundary.close();
    this.healthChecker?.stop();
    if (this.proxy?.running()) await this.proxy.stop(this.o.stopGraceMs ?? PROXY_STOP_GRACE_MS);
    await this.status?.stop();
    await this.xds.stop();
    await this.dns?.close();
    await this.identity?.stop();
    if (this.o.bootstrap) {
      try {
        fs.unlinkSync(this.o.bootstrap.path);
      } catch {
        // never written, or removed already
      }
    }
  }
}

function writeAtomically(file: string, content: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, content, { mode: 0o644 });
  fs.renameSync(tmp, file);
}
