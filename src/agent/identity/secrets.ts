// The workload's secrets as the SDS server hands them to the proxy (Istio's SecretManagerClient):
//  - `default`: the workload certificate chain and key. Read from ./etc/certs (or the workload-spiffe-credentials
//    files) when they are there; otherwise a key made here, a CSR with the SPIFFE identity, and the chain the
//    certificate service signs, renewed when SECRET_GRACE_PERIOD_RATIO (± jitter) of its lifetime is left.
//  - `ROOTCA`: the root that issued it (the chain's last certificate), or ./etc/certs/root-cert.pem.
//  - `file-cert:<chain>~<key>`, `file-root:<ca>`, `file-root:system`: files named by the discovery daemon
//    (gateway and DestinationRule TLS), re-read when they change.
// Unlike Istio, which drops the cached certificate when rotation is due and fails the proxy's SDS stream when
// the CA cannot be reached, the current certificate keeps being served until a new one is issued: while the
// CA is unreachable the renewal is retried with back-off, the time left is logged, and only an expired
// certificate makes the agent not ready.
import * as fs from 'node:fs';
import { X509Certificate } from 'node:crypto';
import path from 'node:path';
import tls from 'node:tls';
import { createCsrPem } from '../../ca/pkix/csr';
import { describeKeySpec, generateKeyPair } from '../../ca/pkix/keys';
import { registerScope } from '../../lib/log';
import {
  numFailedOutgoingRequests,
  numFileSecretFailures,
  numFileWatcherFailures,
  numOutgoingRequests,
  outgoingLatency,
  setCertExpirySource,
} from '../metrics';
import type { CaClient } from './ca-client';
import type { IdentityOptions } from './options';
import { retryDelayMs, rotationDelayMs, timeLeftText } from './rotation';

const log = registerScope('cache', 'cache debugging');

export const WORKLOAD_CERT = 'default';
export const ROOT_CERT = 'ROOTCA';
export const FILE_ROOT_SYSTEM = 'file-root:system';
const FILE_CERT_PREFIX = 'file-cert:';
const FILE_ROOT_PREFIX = 'file-root:';

/** Istio's GetOSRootFilePath candidates. */
const OS_ROOT_FILES = [
  '/etc/ssl/certs/ca-certificates.crt',
  '/etc/pki/tls/certs/ca-bundle.crt',
  '/etc/ssl/ca-bundle.pem',
  '/etc/pki/tls/cacert.pem',
  '/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem',
  '/etc/ssl/cert.pem',
  '/usr/local/etc/ssl/cert.pem',
  '/etc/ssl/certs/ca-certificates',
];

export interface SecretItem {
  name: string;
  /** PEM chain, leaf first (tls_certificate secrets). */
  certificateChain?: Buffer;
  privateKey?: Buffer;
  /** PEM roots (validation_context secrets). */
  rootCert?: Buffer;
  /** Milliseconds since the epoch. */
  createdAt?: number;
  expiresAt?: number;
}

export type SecretKind = 'tls' | 'root';

/** Which file paths a resource name refers to (Istio's SdsCertificateConfigFromResourceName). */
export function fileResource(name: string): { kind: 'cert'; cert: string; key: string } | { kind: 'root'; ca: string } | undefined {
  if (name.startsWith(FILE_CERT_PREFIX)) {
    const parts = name.slice(FILE_CERT_PREFIX.length).split('~');
    if (parts.length !== 2 || !parts[0] || !parts[1]) return undefined;
    return { kind: 'cert', cert: parts[0], key: parts[1] };
  }
  if (name.startsWith(FILE_ROOT_PREFIX)) {
    const parts = name.slice(FILE_ROOT_PREFIX.length).split('~');
    if (parts.length !== 1 || !parts[0]) return undefined;
    return { kind: 'root', ca: parts[0] };
  }
  return undefined;
}

/** Istio's concatCerts: PEM blocks joined, each on its own line. */
export function concatCerts(pems: readonly string[]): Buffer {
  return Buffer.from(pems.map((p, i) => (i < pems.length - 1 && !p.endsWith('\n') ? `${p}\n` : p)).join(''));
}

/** The first certificate's notAfter (Istio's ParseCertAndGetExpiryTimestamp). */
export function leafExpiry(chainPem: Buffer | string): number {
  return new Date(new X509Certificate(chainPem).validTo).getTime();
}

function osRootFile(): string {
  for (const f of OS_ROOT_FILES) {
    try {
      if (fs.statSync(f)) return f;
    } catch {
      // next
    }
  }
  return '';
}

/** Writes `data` to `file` through a temporary file and a rename, so readers never see half a file. */
function atomicWrite(file: string, data: Buffer, mode: number): void {
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, data, { mode });
  fs.chmodSync(tmp, mode);
  fs.renameSync(tmp, file);
}

/** A timer that may be longer than setTimeout's 24.8 days (MAX_WORKLOAD_CERT_TTL is 90 days). */
class LongTimer {
  private t: NodeJS.Timeout | undefined;
  start(ms: number, fn: () => void): void {
    this.clear();
    const arm = (left: number) => {
      const step = Math.min(left, 2 ** 31 - 1);
      this.t = setTimeout(() => (left - step > 0 ? arm(left - step) : fn()), step);
      this.t.unref();
    };
    arm(Math.max(0, ms));
  }
  clear(): void {
    if (this.t) clearTimeout(this.t);
    this.t = undefined;
  }
}

export interface WorkloadSecretsOptions {
  identity: IdentityOptions;
  cwd: string;
  /** Undefined when certificates come from files only (FILE_MOUNTED_CERTS). */
  ca?: CaClient;
  now?: () => number;
  random?: () => number;
}

type Listener = (name: string) => void;

export class WorkloadSecrets {
  private workload: SecretItem | undefined;
  private root: Buffer | undefined;
  private readonly listeners = new Set<Listener>();
  private readonly waiters = new Map<string, Array<() => void>>();
  private readonly rotation = new LongTimer();
  private retry: NodeJS.Timeout | undefined;
  private wakeRetry: (() => void) | undefined;
  private stopped = false;
  private expiredLogged = false;
  /** Set once the first certificate is issued: milliseconds from start() to it. */
  private firstIssued: number | undefined;
  private readonly watchers = new Map<string, { watcher: fs.FSWatcher; names: Set<string>; timer?: NodeJS.Timeout }>();
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly osRoot: string;

  constructor(private readonly o: WorkloadSecretsOptions) {
    this.now = o.now ?? Date.now;
    this.random = o.random ?? Math.random;
    this.osRoot = osRootFile();
  }

  onUpdate(cb: Listener): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  private startedAt = 0;
  /** The key and CSR of an issuance still being retried: a failed call does not cost a new key. */
  private pending: { privateKeyPem: string; csr: string } | undefined;

  /** Starts issuing the workload certificate (unless files provide it), as Istio's SDS server warms it. */
  start(): void {
    this.startedAt = this.now();
    setCertExpirySource(() => this.workloadItem()?.expiresAt);
    if (this.fromFiles(WORKLOAD_CERT)) return;
    if (!this.o.ca) {
      log.warn(
        `FILE_MOUNTED_CERTS is set but ${this.o.identity.files.certChain} / ${this.o.identity.files.key} are missing: no workload certificate until they appear`,
      );
      this.watchFile(this.o.identity.files.certChain, WORKLOAD_CERT);
      return;
    }
    void this.issueLoop();
  }

  stop(): void {
    this.stopped = true;
    this.rotation.clear();
    if (this.retry) clearTimeout(this.retry);
    this.wakeRetry?.();
    for (const w of this.watchers.values()) {
      if (w.timer) clearTimeout(w.timer);
      w.watcher.close();
    }
    this.watchers.clear();
    setCertExpirySource(undefined);
    this.o.ca?.close();
  }

  /** Whether `name` is something this agent serves (the rest, e.g. kubernetes:// credentials, is not). */
  serves(name: string): boolean {
    return name === WORKLOAD_CERT || name === ROOT_CERT || name === FILE_ROOT_SYSTEM || fileResource(name) !== undefined;
  }

  /** The secret now, or undefined when it is not (yet) available. Throws for unreadable files. */
  get(name: string): SecretItem | undefined {
    if (name === WORKLOAD_CERT || name === ROOT_CERT) {
      if (this.fromFiles(name)) return this.readMounted(name);
      if (name === WORKLOAD_CERT) return this.workload;
      return this.root ? { name, rootCert: this.root } : undefined;
    }
    if (name === FILE_ROOT_SYSTEM) {
      if (!this.osRoot) throw new Error('OS CA Cert could not be found for agent');
      return this.readFileSecret(name, { kind: 'root', ca: this.osRoot });
    }
    const f = fileResource(name);
    if (!f) return undefined;
    return this.readFileSecret(name, f);
  }

  /** Resolves with the secret once available (the first certificate may still be on its way). */
  async whenAvailable(name: string, signal?: AbortSignal): Promise<SecretItem> {
    for (;;) {
      const item = this.get(name);
      if (item) return item;
      if (signal?.aborted) throw new Error('aborted');
      await new Promise<void>((resolve) => {
        const list = this.waiters.get(name) ?? [];
        list.push(resolve);
        this.waiters.set(name, list);
        signal?.addEventListener('abort', () => resolve(), { once: true });
      });
    }
  }

  /** The certificate the agent presents to the control plane (the workload's own). */
  workloadItem(): SecretItem | undefined {
    try {
      return this.get(WORKLOAD_CERT);
    } catch {
      return undefined;
    }
  }

  /** Set once the served workload certificate has expired (readiness fails then). */
  expiredFor(): number | undefined {
    const w = this.workloadItem();
    if (!w?.expiresAt) return undefined;
    const left = w.expiresAt - this.now();
    return left <= 0 ? -left : undefined;
  }

  private notify(name: string): void {
    const waiting = this.waiters.get(name);
    if (waiting) {
      this.waiters.delete(name);
      for (const w of waiting) w();
    }
    for (const l of this.listeners) l(name);
  }

  // ---- certificates from the CA ----

  private async issueLoop(): Promise<void> {
    for (let attempt = 0; !this.stopped; attempt++) {
      try {
        const item = await this.issue();
        if (this.stopped) return;
        this.install(item);
        return;
      } catch (e) {
        if (this.stopped) return;
        const current = this.workload;
        const left = current?.expiresAt !== undefined ? current.expiresAt - this.now() : undefined;
        const wait = retryDelayMs(attempt, left, this.random);
        if (current && left !== undefined) {
          if (left <= 0 && !this.expiredLogged) {
            this.expiredLogged = true;
            log.error(`the workload certificate has expired and no new one could be issued: the agent reports not ready until one is`);
          }
          log.warn(
            `failed to renew the workload certificate (attempt ${attempt + 1}): ${(e as Error).message}; the current certificate ${timeLeftText(left)}, still served; retrying in ${wait}ms`,
          );
        } else {
          log.warn(`failed to get the workload certificate (attempt ${attempt + 1}): ${(e as Error).message}; retrying in ${wait}ms`);
        }
        await new Promise<void>((resolve) => {
          this.wakeRetry = resolve;
          this.retry = setTimeout(resolve, wait);
          this.retry.unref();
        });
        this.retry = undefined;
        this.wakeRetry = undefined;
      }
    }
  }

  /** One issuance: a fresh key, a CSR for the SPIFFE identity, the CA's signature. */
  private async issue(): Promise<SecretItem> {
    const id = this.o.identity;
    const t0 = this.now();
    this.o.ca!.prepare();
    if (!this.pending) {
      const key = await generateKeyPair(id.key, id.pkcs8);
      this.pending = { privateKeyPem: key.privateKeyPem, csr: createCsrPem({ privateKey: key.privateKey, sans: { uris: [id.spiffeId] } }) };
      log.debug(`constructed host name for CSR: ${id.spiffeId} (${describeKeySpec(id.key)} key)`);
    }
    const { privateKeyPem, csr } = this.pending;
    numOutgoingRequests.inc({ request_type: 'csr' });
    const before = this.now();
    let chain: string[];
    try {
      chain = await this.o.ca!.sign(csr, Math.floor(id.secretTtlMs / 1000));
    } catch (e) {
      numFailedOutgoingRequests.inc({ request_type: 'csr' });
      throw e;
    } finally {
      outgoingLatency.inc({ request_type: 'csr' }, this.now() - before);
    }
    const certificateChain = concatCerts(chain);
    let expiresAt: number;
    try {
      expiresAt = leafExpiry(certificateChain);
    } catch (e) {
      throw new Error(`failed to extract expire time from server certificate in CSR response: ${(e as Error).message}`);
    }
    const now = this.now();
    log.info('generated new workload certificate', {
      resourceName: WORKLOAD_CERT,
      latency: `${now - t0}ms`,
      ttl: timeLeftText(expiresAt - now).replace('expires in ', ''),
    });
    this.pending = undefined;
    return {
      name: WORKLOAD_CERT,
      certificateChain,
      privateKey: Buffer.from(privateKeyPem),
      rootCert: Buffer.from(chain[chain.length - 1]!),
      createdAt: now,
      expiresAt,
    };
  }

  private install(item: SecretItem): void {
    this.workload = item;
    this.expiredLogged = false;
    if (this.firstIssued === undefined) {
      this.firstIssued = this.now() - this.startedAt;
      log.info(`first workload certificate ${Math.round(process.uptime() * 1000)}ms after the agent started (${this.firstIssued}ms after it asked)`);
    }
    const rootChanged = !this.root || !this.root.equals(item.rootCert!);
    if (rootChanged) {
      if (this.root) log.info('Root cert has changed, start rotating root cert');
      this.root = item.rootCert;
    }
    this.output();
    this.notify(WORKLOAD_CERT);
    if (rootChanged) this.notify(ROOT_CERT);
    const id = this.o.identity;
    const delay = rotationDelayMs(
      { createdAt: item.createdAt!, expiresAt: item.expiresAt! },
      this.now(),
      id.graceRatio,
      id.graceRatioJitter,
      this.random,
    );
    if (delay === undefined) {
      log.info('SECRET_GRACE_PERIOD_RATIO is 0: the workload certificate is not rotated');
      return;
    }
    log.debug(`scheduled certificate for rotation in ${delay}ms`);
    this.rotation.start(delay, () => {
      if (this.stopped || this.workload !== item) return;
      log.info('rotating the workload certificate');
      void this.issueLoop();
    });
  }

  /** OUTPUT_CERTS: key.pem, cert-chain.pem, root-cert.pem, rewritten only when they changed. */
  private output(): void {
    const dir = this.o.identity.outputDir;
    if (!dir || !this.workload) return;
    // Istio gives the files to other containers of a Kubernetes pod (0644), keeps them private elsewhere.
    const mode = process.env['KUBERNETES_SERVICE_HOST'] ? 0o644 : 0o600;
    try {
      const abs = path.resolve(this.o.cwd, dir);
      fs.mkdirSync(abs, { recursive: true });
      const write = (file: string, data: Buffer | undefined) => {
        if (!data) return;
        const p = path.join(abs, file);
        let old: Buffer | undefined;
        try {
          old = fs.readFileSync(p);
        } catch {
          old = undefined;
        }
        if (!old || !old.equals(data)) atomicWrite(p, data, mode);
      };
      write('key.pem', this.workload.privateKey);
      write('cert-chain.pem', this.workload.certificateChain);
      write('root-cert.pem', this.root);
      log.debug(`output the resource to ${dir}`);
    } catch (e) {
      log.error(`error when output the resource: ${(e as Error).message}`);
    }
  }

  // ---- certificates from files ----

  /** Whether `default` / `ROOTCA` come from the mounted files (present, and not our own OUTPUT_CERTS). */
  private fromFiles(name: string): boolean {
    const f = this.o.identity.files;
    const out = this.o.identity.outputDir;
    if (out && path.resolve(this.o.cwd, out) === path.resolve(this.o.cwd, path.dirname(f.certChain))) return false;
    const nonEmpty = (p: string) => {
      try {
        return fs.statSync(path.resolve(this.o.cwd, p)).size > 0;
      } catch {
        return false;
      }
    };
    return name === WORKLOAD_CERT ? nonEmpty(f.certChain) && nonEmpty(f.key) : nonEmpty(f.root);
  }

  private readMounted(name: string): SecretItem | undefined {
    const f = this.o.identity.files;
    return name === WORKLOAD_CERT
      ? this.readFileSecret(name, { kind: 'cert', cert: f.certChain, key: f.key })
      : this.readFileSecret(name, { kind: 'root', ca: f.root });
  }

  private readFileSecret(name: string, f: NonNullable<ReturnType<typeof fileResource>>): SecretItem {
    // Watched before reading: a file that is not there yet is served when it appears.
    this.watchFile(f.kind === 'root' ? f.ca : f.cert, name);
    try {
      if (f.kind === 'root') {
        const rootCert = fs.readFileSync(path.resolve(this.o.cwd, f.ca));
        new X509Certificate(rootCert); // a file that is not a certificate fails here, not in the proxy
        return { name, rootCert };
      }
      const certificateChain = fs.readFileSync(path.resolve(this.o.cwd, f.cert));
      const privateKey = fs.readFileSync(path.resolve(this.o.cwd, f.key));
      tls.createSecureContext({ cert: certificateChain, key: privateKey }); // Istio's tls.LoadX509KeyPair check
      return { name, certificateChain, privateKey, createdAt: this.now(), expiresAt: leafExpiry(certificateChain) };
    } catch (e) {
      numFileSecretFailures.inc();
      throw new Error(`failed to generate secret for proxy from file (${name}): ${(e as Error).message}`);
    }
  }

  /** Watches a file's directory (a renamed-in file is a change too) and re-announces `name` when it changes. */
  private watchFile(file: string, name: string): void {
    const abs = path.resolve(this.o.cwd, file);
    const dir = path.dirname(abs);
    const base = path.basename(abs);
    const key = `${dir}\0${base}`;
    const existing = this.watchers.get(key);
    if (existing) {
      existing.names.add(name);
      return;
    }
    let watcher: fs.FSWatcher;
    try {
      watcher = fs.watch(dir, { persistent: false });
    } catch (e) {
      numFileWatcherFailures.inc();
      log.error(`${name}: error adding watcher for file ${abs}: ${(e as Error).message}`);
      return;
    }
    log.info(`adding watcher for file certificate ${abs}`);
    const entry = { watcher, names: new Set([name]), timer: undefined as NodeJS.Timeout | undefined };
    watcher.on('change', (_event, filename) => {
      if (filename !== null && String(filename) !== base && !String(filename).startsWith('..')) return;
      if (entry.timer) clearTimeout(entry.timer);
      entry.timer = setTimeout(() => {
        entry.timer = undefined;
        log.info(`event for file certificate ${abs}, pushing to proxy`);
        for (const n of entry.names) this.notify(n);
      }, this.o.identity.fileDebounceMs);
      entry.timer.unref();
    });
    watcher.on('error', (e) => {
      numFileWatcherFailures.inc();
      log.error(`certificate watch error: ${e.message}`);
    });
    this.watchers.set(key, entry);
  }
}
