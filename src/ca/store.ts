// Where the self-signed root and its key live between restarts. With an orchestrator: the Secret Istio uses
// (`mesh-ca-secret`, or `cacerts` with USE_CACERTS_FOR_SELF_SIGNED_CA), so every replica and every restart
// signs with one root. With no cluster: ca-cert.pem and ca-key.pem (0600) in a directory of the daemon's
// working directory, ./var/lib/mesh/ca.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { OrchApiError } from '../config/orch';
import type { OrchApi } from './authn/orch-token';

export interface StoredRoot {
  certPem: string;
  keyPem: string;
}

export interface CaStore {
  /** For messages: `directory ./var/lib/mesh/ca`, `secret mesh-system/mesh-ca-secret`. */
  readonly describe: string;
  /** The stored root, or undefined when there is none yet. */
  load(): Promise<StoredRoot | undefined>;
  /** Stores a new root; false when another writer created one first (then load() and use theirs). */
  create(root: StoredRoot): Promise<boolean>;
  /** Replaces the stored root (rotation). */
  update(root: StoredRoot): Promise<void>;
}

/** The no-cluster store's directory, relative to the working directory (documented in the README). */
export const DEFAULT_CA_DIR = './var/lib/mesh/ca';
export const CA_CERT_FILE = 'ca-cert.pem';
export const CA_KEY_FILE = 'ca-key.pem';
export const CERT_CHAIN_FILE = 'cert-chain.pem';
export const ROOT_CERT_FILE = 'root-cert.pem';
export const KEY_FILE = 'key.pem';

function readIfExists(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/** Writes via a temporary file and rename, so a reader never sees half a key. */
export function writeFileAtomic(file: string, data: string, mode: number): void {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(4).toString('hex')}`);
  fs.writeFileSync(tmp, data, { mode });
  fs.chmodSync(tmp, mode);
  fs.renameSync(tmp, file);
}

export class FileCaStore implements CaStore {
  readonly describe: string;

  constructor(readonly dir: string = DEFAULT_CA_DIR) {
    this.describe = `directory ${dir}`;
  }

  async load(): Promise<StoredRoot | undefined> {
    const certFile = path.join(this.dir, CA_CERT_FILE);
    const keyFile = path.join(this.dir, CA_KEY_FILE);
    const certPem = readIfExists(certFile);
    const keyPem = readIfExists(keyFile);
    if (certPem === undefined && keyPem === undefined) return undefined;
    if (certPem === undefined) throw new Error(`${certFile}: missing, but ${keyFile} exists; remove both to make a new root, or restore it`);
    if (keyPem === undefined) throw new Error(`${keyFile}: missing, but ${certFile} exists; remove both to make a new root, or restore it`);
    return { certPem, keyPem };
  }

  async create(root: StoredRoot): Promise<boolean> {
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    // The key is written first and exclusively: of two daemons starting in one directory, one wins.
    try {
      fs.writeFileSync(path.join(this.dir, CA_KEY_FILE), root.keyPem, { mode: 0o600, flag: 'wx' });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw e;
    }
    writeFileAtomic(path.join(this.dir, CA_CERT_FILE), root.certPem, 0o644);
    return true;
  }

  async update(root: StoredRoot): Promise<void> {
    writeFileAtomic(path.join(this.dir, CA_KEY_FILE), root.keyPem, 0o600);
    writeFileAtomic(path.join(this.dir, CA_CERT_FILE), root.certPem, 0o644);
  }
}

/** Istio's CA secret names (renamed) and the marker key of a generated `cacerts`. */
export const CA_SECRET = 'mesh-ca-secret';
export const CACERTS_SECRET = 'cacerts';
export const GENERATED_KEY = 'mesh-generated';
export const CA_SECRET_TYPE = 'mesh.io/ca-root';

interface Secret {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  data?: Record<string, string>;
  type?: string;
}

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const unb64 = (s: string | undefined) => (s === undefined ? '' : Buffer.from(s, 'base64').toString('utf8'));

/** Istio's BuildSecret for a self-signed root: ca-cert.pem, ca-key.pem and root-cert.pem (= the CA cert). */
export function caSecretObject(name: string, namespace: string, root: StoredRoot): Secret & { apiVersion: string; kind: string } {
  const data: Record<string, string> = {
    [CERT_CHAIN_FILE]: '',
    [KEY_FILE]: '',
    [ROOT_CERT_FILE]: b64(root.certPem),
    [CA_CERT_FILE]: b64(root.certPem),
    [CA_KEY_FILE]: b64(root.keyPem),
  };
  if (name === CACERTS_SECRET) data[GENERATED_KEY] = '';
  return { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace }, data, type: CA_SECRET_TYPE };
}

const isNotFound = (e: unknown) => e instanceof OrchApiError && e.statusCode === 404;

export class SecretCaStore implements CaStore {
  private name: string;

  /**
   * `useCacerts` (USE_CACERTS_FOR_SELF_SIGNED_CA): `mesh-ca-secret` is still read first; without it the root
   * is read from, or created as, `cacerts`.
   */
  constructor(
    private readonly api: OrchApi,
    readonly namespace: string,
    private readonly useCacerts: boolean,
  ) {
    this.name = CA_SECRET;
  }

  get describe(): string {
    return `secret ${this.namespace}/${this.name}`;
  }

  private path(name: string): string {
    return `/api/v1/namespaces/${encodeURIComponent(this.namespace)}/secrets/${encodeURIComponent(name)}`;
  }

  private async read(name: string): Promise<Secret | undefined> {
    try {
      return (await this.api.request('GET', this.path(name))) as Secret;
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }

  private toRoot(s: Secret, name: string): StoredRoot {
    const certPem = unb64(s.data?.[CA_CERT_FILE]);
    const keyPem = unb64(s.data?.[CA_KEY_FILE]);
    if (!certPem) throw new Error(`secret ${this.namespace}/${name}: no ${CA_CERT_FILE}`);
    if (!keyPem) throw new Error(`secret ${this.namespace}/${name}: no ${CA_KEY_FILE}`);
    return { certPem, keyPem };
  }

  async load(): Promise<StoredRoot | undefined> {
    const primary = await this.read(CA_SECRET);
    if (primary) {
      this.name = CA_SECRET;
      return this.toRoot(primary, CA_SECRET);
    }
    if (this.useCacerts) {
      this.name = CACERTS_SECRET;
      const cacerts = await this.read(CACERTS_SECRET);
      if (cacerts) return this.toRoot(cacerts, CACERTS_SECRET);
    }
    return undefined;
  }

  async create(root: StoredRoot): Promise<boolean> {
    try {
      await this.api.request('POST', `/api/v1/namespaces/${encodeURIComponent(this.namespace)}/secrets`, {
        body: caSecretObject(this.name, this.namespace, root),
      });
      return true;
    } catch (e) {
      if (e instanceof OrchApiError && e.statusCode === 409) return false;
      throw e;
    }
  }

  async update(root: StoredRoot): Promise<void> {
    const current = await this.read(this.name);
    if (!current) {
      await this.create(root);
      return;
    }
    const data = { ...(current.data ?? {}), [CA_CERT_FILE]: b64(root.certPem), [CA_KEY_FILE]: b64(root.keyPem) };
    await this.api.request('PUT', this.path(this.name), { body: { ...current, apiVersion: 'v1', kind: 'Secret', data } });
  }
}

export { readIfExists };
