// Bringing the CA up as Istio's createIstioCA does, and keeping it current: a complete plug-in set in
// ROOT_CA_DIR is used (and watched); otherwise the self-signed root is loaded from its store or made and
// stored, then checked every CA_SELF_SIGNED_ROOT_CERT_CHECK_INTERVAL and rotated in its grace period.
// Whoever shows the roots or serves with a CA-issued certificate subscribes to changes.
import fs from 'node:fs';
import path from 'node:path';
import { registerScope } from '../lib/log';
import { CertificateAuthority } from './authority';
import type { KeyCertBundle } from './bundle';
import { parseCertificatesPem } from './pkix/cert';
import { recordCertsExpiry } from './metrics';
import { completeness, GENERATED_MARKER, loadPluginBundle, PluginCaError, rootChangeAllowed, signingFiles, type SigningFiles } from './plugin';
import { generateRoot, rootRotationWaitMs, rotatedRoot, selfSignedBundle } from './selfsigned';
import type { CaSettings } from './settings';
import { type CaStore, readIfExists, ROOT_CERT_FILE } from './store';

const log = registerScope('ca', 'CA bootstrap');
const rotatorLog = registerScope('rootcertrotator', 'Self-signed CA root cert rotator log');

export class CaStartError extends Error {}

export interface MeshCaOptions {
  settings: CaSettings;
  /** The mesh trust domain: the self-signed root's organization. */
  trustDomain: string;
  /** Where the self-signed root is kept (a directory, or the CA Secret). */
  store: CaStore;
  now?: () => number;
}

/** Plug-in material watch debounce (Istio: 100 ms). */
const WATCH_DEBOUNCE_MS = 100;

export class MeshCa {
  readonly ca: CertificateAuthority;
  private readonly listeners = new Set<(b: KeyCertBundle) => void>();
  private timers: NodeJS.Timeout[] = [];
  private watcher: fs.FSWatcher | undefined;
  private closed = false;

  private constructor(
    readonly kind: 'self-signed' | 'plug-in',
    bundle: KeyCertBundle,
    private readonly o: MeshCaOptions,
    /** Where the material comes from, for messages. */
    readonly source: string,
    private readonly files?: SigningFiles,
  ) {
    this.ca = new CertificateAuthority(bundle, {
      defaultCertTtlMs: o.settings.defaultWorkloadCertTtlMs,
      maxCertTtlMs: o.settings.maxWorkloadCertTtlMs,
      now: o.now,
    });
    recordCertsExpiry(bundle);
  }

  static async start(o: MeshCaOptions): Promise<MeshCa> {
    const dir = o.settings.rootCaDir;
    const files = signingFiles(dir);
    const c = completeness(files);
    if (!c.complete && c.any) {
      throw new CaStartError(`ROOT_CA_DIR ${dir}: incomplete signing CA bundle detected: missing ${c.missing.join(', ')}`);
    }
    const generated = c.complete && fs.existsSync(path.join(dir, GENERATED_MARKER));
    if (c.complete && !(o.settings.useCacertsForSelfSigned && generated)) {
      log.info(`Use local CA certificate from ROOT_CA_DIR ${dir}`);
      let bundle: KeyCertBundle;
      try {
        bundle = loadPluginBundle(files, new Date(o.now?.() ?? Date.now()));
      } catch (e) {
        if (e instanceof PluginCaError) throw new CaStartError(`failed to create a CA from ROOT_CA_DIR ${dir}: ${e.message}`);
        throw e;
      }
      const ca = new MeshCa('plug-in', bundle, o, `ROOT_CA_DIR ${dir}`, files);
      ca.watchPlugin(dir);
      return ca;
    }
    if (generated) log.info(`ROOT_CA_DIR ${dir} holds a generated root (${GENERATED_MARKER}); the self-signed root in ${o.store.describe} is used`);
    const extraRoots = (): string => readIfExists(path.join(dir, ROOT_CERT_FILE)) ?? '';
    let stored = await o.store.load();
    if (stored) {
      log.info(`Load signing key and cert from existing ${o.store.describe}`);
    } else {
      log.info(`CA root not found in ${o.store.describe}, will create one`);
      const made = await generateRoot({ ttlMs: o.settings.selfSignedCaTtlMs, org: o.trustDomain, rsaKeySize: o.settings.rsaKeySize, now: o.now?.() });
      if (await o.store.create(made)) {
        stored = made;
      } else {
        // Another replica stored one first: everyone signs with the same root.
        stored = await o.store.load();
        if (!stored) throw new CaStartError(`${o.store.describe}: created by another writer but cannot be read back`);
      }
    }
    let bundle: KeyCertBundle;
    try {
      bundle = selfSignedBundle(stored, o.store.describe, extraRoots(), new Date(o.now?.() ?? Date.now()));
    } catch (e) {
      throw new CaStartError(`failed to create a self-signed CA from ${o.store.describe}: ${(e as Error).message}`);
    }
    const ca = new MeshCa('self-signed', bundle, o, o.store.describe);
    ca.startRotator(extraRoots);
    return ca;
  }

  /** Called with the new bundle after every change (rotation, plug-in reload, another replica's rotation). */
  onChange(fn: (b: KeyCertBundle) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private set(bundle: KeyCertBundle): void {
    this.ca.setBundle(bundle);
    recordCertsExpiry(bundle);
    for (const fn of this.listeners) {
      try {
        fn(bundle);
      } catch (e) {
        log.error(`after a CA change: ${(e as Error).message}`);
      }
    }
  }

  // ---- self-signed root rotation ----------------------------------------------------------------

  private startRotator(extraRoots: () => string): void {
    const s = this.o.settings;
    if (s.rootCheckIntervalMs <= 0) {
      rotatorLog.info('CA_SELF_SIGNED_ROOT_CERT_CHECK_INTERVAL is not positive: the self-signed root is not rotated');
      return;
    }
    // Jitter: replicas started together do not all check (and rotate) at the same moment.
    const backOff = s.rootRotatorJitter ? Math.floor((Math.random() * s.rootCheckIntervalMs) / 1000) * 1000 : 0;
    if (s.rootRotatorJitter) rotatorLog.info(`Jitter is enabled, wait ${backOff / 1000}s before starting root cert rotator.`);
    const first = setTimeout(() => {
      const tick = setInterval(() => void this.checkAndRotate(extraRoots), s.rootCheckIntervalMs);
      tick.unref();
      this.timers.push(tick);
    }, backOff);
    first.unref();
    this.timers.push(first);
  }

  /** One rotator round: reload a root another replica rotated, or rotate when the grace period has begun. */
  async checkAndRotate(extraRoots: () => string = () => ''): Promise<'kept' | 'reloaded' | 'rotated' | 'failed'> {
    const s = this.o.settings;
    let stored;
    try {
      stored = await this.o.store.load();
    } catch (e) {
      rotatorLog.error(`Fail to load CA root from ${this.o.store.describe} (error: ${(e as Error).message}), skip cert rotation job`);
      return 'failed';
    }
    if (!stored) {
      rotatorLog.error(`root cert ${this.o.store.describe} is gone, skip cert rotation job`);
      return 'failed';
    }
    const now = this.o.now?.() ?? Date.now();
    const current = this.ca.bundle.roots[0]!;
    let storedCert;
    try {
      storedCert = parseCertificatesPem(stored.certPem)[0];
    } catch {
      storedCert = undefined;
    }
    const wait = storedCert ? rootRotationWaitMs(storedCert.notBefore, storedCert.notAfter, s.rootGracePercentile, now) : 0;
    if (wait > 0) {
      if (stored.certPem === this.ca.bundle.signingCertPem) return 'kept';
      // Another replica rotated the stored root: take it over.
      rotatorLog.warn(`CA cert in KeyCertBundle does not match CA cert in ${this.o.store.describe}. Start to reload root cert into KeyCertBundle`);
      try {
        this.set(selfSignedBundle(stored, this.o.store.describe, extraRoots(), new Date(now)));
      } catch (e) {
        rotatorLog.error(`failed to reload root cert into KeyCertBundle (${(e as Error).message})`);
        return 'failed';
      }
      rotatorLog.info('Successfully reloaded root cert into KeyCertBundle.');
      return 'reloaded';
    }
    rotatorLog.info(`Refresh root certificate, root cert is about to expire: it expires at ${current.notAfter.toISOString()}`);
    const certPem = rotatedRoot(stored, { ttlMs: s.selfSignedCaTtlMs, org: this.o.trustDomain, now });
    let bundle: KeyCertBundle;
    try {
      bundle = selfSignedBundle({ certPem, keyPem: stored.keyPem }, this.o.store.describe, extraRoots(), new Date(now));
    } catch (e) {
      rotatorLog.error(`unable to generate CA cert and key for self-signed CA: ${(e as Error).message}`);
      return 'failed';
    }
    try {
      await this.o.store.update({ certPem, keyPem: stored.keyPem });
    } catch (e) {
      rotatorLog.error(`Failed to roll forward root certificate (error: ${(e as Error).message}). Abort new root certificate`);
      return 'failed';
    }
    rotatorLog.info(`Root certificate is written into ${this.o.store.describe}`);
    this.set(bundle);
    rotatorLog.info('Root certificate rotation is completed successfully.');
    return 'rotated';
  }

  // ---- plug-in watch ----------------------------------------------------------------------------

  private watchPlugin(dir: string): void {
    let timer: NodeJS.Timeout | undefined;
    try {
      this.watcher = fs.watch(dir, () => {
        if (this.closed) return;
        timer ??= setTimeout(() => {
          timer = undefined;
          this.reloadPlugin();
        }, WATCH_DEBOUNCE_MS);
      });
      this.watcher.on('error', (e) => log.error(`failed to catch events on cacerts file: ${e.message}`));
      log.info(`Added cacerts files watcher at ${dir}`);
    } catch (e) {
      log.warn(`failed to add CAcerts file watcher for ${dir}: ${(e as Error).message}`);
    }
  }

  /** Istio's handleEvent: verify the changed plug-in files and, if good, sign with them from now on. */
  reloadPlugin(): 'unchanged' | 'updated' | 'refused' {
    if (!this.files) return 'unchanged';
    const files = signingFiles(this.o.settings.rootCaDir);
    const rootPem = readIfExists(files.rootCert);
    if (rootPem === undefined) {
      log.error(`failed reading ${files.rootCert}: no such file`);
      return 'refused';
    }
    const current = this.ca.bundle;
    if (rootPem !== current.rootCertPem) {
      const allowed = rootChangeAllowed(current.rootCertPem, rootPem, this.o.settings.multiRoot);
      if (!allowed.ok) {
        log.warn(allowed.reason);
        return 'refused';
      }
      log.info('Updating new ROOT-CA');
    }
    let bundle: KeyCertBundle;
    try {
      bundle = loadPluginBundle(files, new Date(this.o.now?.() ?? Date.now()));
    } catch (e) {
      log.error(`Failed to update new Plug-in CA certs: ${(e as Error).message}`);
      return 'refused';
    }
    if (
      bundle.signingCertPem === current.signingCertPem &&
      bundle.rootCertPem === current.rootCertPem &&
      bundle.certChainPem === current.certChainPem &&
      bundle.signingKeyPem === current.signingKeyPem
    ) {
      return 'unchanged';
    }
    this.set(bundle);
    log.info('the daemon has detected the newly added intermediate CA and updated its key and certs accordingly');
    return 'updated';
  }

  close(): void {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers = [];
    this.watcher?.close();
  }
}
