// Fixtures of the CA tests: CSRs and plug-in CA material made by the openssl CLI (not by the code under
// test), a JWKS issuer minting real signed tokens, and a gRPC client of the real CA service.
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import * as fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import * as jose from 'jose';
import type { Test } from 'tap';
import { IstioCertificateRequestSchema, IstioCertificateService } from '../../src/gen/security/v1alpha1/ca_pb';
import { grpcClientConstructor } from '../../src/lib/xds/grpc';
import { jwksDocument, rsaKey, startKeyServer, type KeyServer, type SigningKey } from '../security/helpers';
import { tempDir } from '../helpers/temp';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { signWith } from '../helpers/openssl';

/** A scratch directory with the daemon's working directory (`cwd`) and an empty --configDir (`cfg`) in it. */
export function daemonDirs(t: Test): { dir: string; cwd: string; cfg: string } {
  const dir = tempDir(t);
  const cwd = path.join(dir, 'meshd');
  const cfg = path.join(dir, 'cfg');
  fs.mkdirSync(cwd);
  fs.mkdirSync(cfg);
  return { dir, cwd, cfg };
}

/**
 * The built daemon with the Mock registry on the empty --configDir of `dirs` (default fresh `daemonDirs`), its CA
 * keeping its root in `dirs.cwd`; stopped in teardown.
 */
export async function startMockDaemon(t: Test, env: NodeJS.ProcessEnv, dirs: { cwd: string; cfg: string } = daemonDirs(t)): Promise<RunningDaemon> {
  const d = await startDaemon(['--configDir', dirs.cfg, '--registries', 'Mock'], env, 30_000, { cwd: dirs.cwd });
  t.teardown(() => d.stop());
  return d;
}

/** Runs openssl; throws with its stderr on failure. */
export function openssl(args: readonly string[], o: { cwd?: string; input?: string } = {}): string {
  const r = spawnSync('openssl', args, { cwd: o.cwd, input: o.input, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** `openssl verify` of a leaf against a root bundle (and untrusted intermediates): its output, or the error. */
export function opensslVerify(dir: string, rootPem: string, leafPem: string, intermediatesPem = ''): { ok: boolean; out: string } {
  const root = path.join(dir, `verify-root-${Math.random().toString(36).slice(2)}.pem`);
  const leaf = path.join(dir, `verify-leaf-${Math.random().toString(36).slice(2)}.pem`);
  fs.writeFileSync(root, rootPem);
  fs.writeFileSync(leaf, leafPem);
  const args = ['verify', '-CAfile', root];
  if (intermediatesPem) {
    const im = path.join(dir, `verify-im-${Math.random().toString(36).slice(2)}.pem`);
    fs.writeFileSync(im, intermediatesPem);
    args.push('-untrusted', im);
  }
  args.push(leaf);
  const r = spawnSync('openssl', args, { encoding: 'utf8' });
  return { ok: r.status === 0, out: `${r.stdout}${r.stderr}`.trim() };
}

/** A CSR made by openssl: RSA 2048 or ECDSA P-256, optionally asking for SANs (which the CA must ignore). */
export function opensslCsr(dir: string, kind: 'rsa' | 'ec', o: { san?: string; cn?: string } = {}): { csr: string; key: string } {
  const base = path.join(dir, `csr-${kind}-${Math.random().toString(36).slice(2)}`);
  const newkey = kind === 'rsa' ? ['-newkey', 'rsa:2048'] : ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256'];
  const args = ['req', '-new', ...newkey, '-nodes', '-keyout', `${base}.key`, '-out', `${base}.csr`, '-subj', o.cn ? `/CN=${o.cn}` : '/O=mesh-test'];
  if (o.san) args.push('-addext', `subjectAltName=${o.san}`);
  openssl(args);
  return { csr: fs.readFileSync(`${base}.csr`, 'utf8'), key: fs.readFileSync(`${base}.key`, 'utf8') };
}

/**
 * A plug-in CA as an operator makes one with openssl: a root, an intermediate signed by it, written in
 * ROOT_CA_DIR's layout (ca-cert.pem, ca-key.pem, cert-chain.pem = intermediate + root, root-cert.pem).
 */
export function opensslPluginCa(
  dir: string,
  o: { ec?: boolean; cn?: string } = {},
): { rootPem: string; intermediatePem: string; rootKey: string; rootCert: string } {
  fs.mkdirSync(dir, { recursive: true });
  const key = o.ec ? ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256'] : ['-newkey', 'rsa:2048'];
  fs.writeFileSync(
    path.join(dir, 'ca.ext'),
    'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign,digitalSignature\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n',
  );
  openssl(
    [
      'req',
      '-x509',
      ...key,
      '-nodes',
      '-keyout',
      'root-key.pem',
      '-out',
      'root-cert.pem',
      '-days',
      '30',
      '-subj',
      `/O=Plugin Root/CN=${o.cn ?? 'plugin-root'}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ],
    { cwd: dir },
  );
  openssl(['req', ...key, '-nodes', '-keyout', 'ca-key.pem', '-out', 'ca.csr', '-subj', '/O=Plugin Intermediate/CN=plugin-intermediate'], {
    cwd: dir,
  });
  openssl([...signWith('ca.csr', 'root-cert.pem', 'root-key.pem'), '-out', 'ca-cert.pem', '-days', '20', '-extfile', 'ca.ext'], { cwd: dir });
  const rootPem = fs.readFileSync(path.join(dir, 'root-cert.pem'), 'utf8');
  const intermediatePem = fs.readFileSync(path.join(dir, 'ca-cert.pem'), 'utf8');
  fs.writeFileSync(path.join(dir, 'cert-chain.pem'), intermediatePem + rootPem);
  // The root's key stays out of ROOT_CA_DIR, as it would in real life.
  const rootKey = path.join(dir, '..', `${path.basename(dir)}-root-key.pem`);
  fs.renameSync(path.join(dir, 'root-key.pem'), rootKey);
  for (const f of ['ca.csr', 'ca.ext', 'root-cert.srl']) fs.rmSync(path.join(dir, f), { force: true });
  return { rootPem, intermediatePem, rootKey, rootCert: path.join(dir, 'root-cert.pem') };
}

export interface Issuer {
  server: KeyServer;
  issuer: string;
  jwksUri: string;
  key: SigningKey;
  /** A token for `system:serviceaccount:<ns>:<sa>` (or `sub`), audience `aud`, expiring in `expSeconds`. */
  token(o: { ns?: string; sa?: string; sub?: string; aud?: string | string[]; expSeconds?: number; key?: SigningKey; iss?: string }): Promise<string>;
  /** JWT_RULE for this issuer. */
  rule(audiences?: string[]): string;
}

/** An OIDC-style issuer on loopback: a JWKS document of a fresh RSA key, tokens signed with jose. */
export async function startIssuer(t: Test): Promise<Issuer> {
  const key = rsaKey('test-kid');
  const server = await startKeyServer(jwksDocument(key));
  t.teardown(() => server.close());
  const issuer = `http://127.0.0.1:${server.port}`;
  return {
    server,
    issuer,
    jwksUri: server.url('/jwks'),
    key,
    async token(o) {
      const k = o.key ?? key;
      const now = Math.floor(Date.now() / 1000);
      const sub = o.sub ?? `system:serviceaccount:${o.ns ?? 'default'}:${o.sa ?? 'app'}`;
      return new jose.SignJWT({ sub, aud: o.aud ?? 'mesh-ca' })
        .setProtectedHeader({ alg: 'RS256', kid: k.kid })
        .setIssuer(o.iss ?? issuer)
        .setIssuedAt(now - 60)
        .setExpirationTime(now + (o.expSeconds ?? 3600))
        .sign(k.privateKey);
    },
    rule: (audiences = ['mesh-ca']) => JSON.stringify({ issuer, jwks_uri: server.url('/jwks'), audiences }),
  };
}

/** The DNS name the daemon's own certificate carries, used as the TLS server name on loopback. */
export const MESHD_HOST = 'meshd.mesh-system.svc';

const CaClient = grpcClientConstructor(IstioCertificateService);
export type CaClientInstance = InstanceType<typeof CaClient>;

export function caClient(t: Test, address: string, rootPem: string, clientCert?: { cert: string; key: string }): CaClientInstance {
  const creds = grpc.credentials.createSsl(
    Buffer.from(rootPem),
    clientCert ? Buffer.from(clientCert.key) : null,
    clientCert ? Buffer.from(clientCert.cert) : null,
  );
  const c = new CaClient(address, creds, { 'grpc.ssl_target_name_override': MESHD_HOST, 'grpc.default_authority': MESHD_HOST });
  t.teardown(() => c.close());
  return c;
}

export function plainCaClient(t: Test, address: string): CaClientInstance {
  const c = new CaClient(address, grpc.credentials.createInsecure());
  t.teardown(() => c.close());
  return c;
}

export interface CertRequest {
  csr: string;
  ttlSeconds?: number;
  token?: string;
  metadata?: Record<string, string>;
  headers?: Record<string, string>;
}

/** Calls CreateCertificate; resolves to the chain or rejects with the gRPC error. */
export function createCertificate(client: CaClientInstance, r: CertRequest): Promise<string[]> {
  const md = new grpc.Metadata();
  if (r.token) md.set('authorization', `Bearer ${r.token}`);
  for (const [k, v] of Object.entries(r.headers ?? {})) md.set(k, v);
  const req = create(IstioCertificateRequestSchema, { csr: r.csr, validityDuration: BigInt(r.ttlSeconds ?? 0), metadata: r.metadata });
  return new Promise((resolve, reject) => {
    client.createCertificate(req, md, { deadline: Date.now() + 15_000 }, (err, res) => (err ? reject(err) : resolve(res!.certChain)));
  });
}

/** URI/DNS/IP SANs of a PEM certificate, as node:crypto (not the code under test) reads them. */
export function sans(pem: string): string[] {
  const s = new X509Certificate(pem).subjectAltName ?? '';
  return s === '' ? [] : s.split(', ');
}

export function lifetimeSeconds(pem: string): number {
  const c = new X509Certificate(pem);
  return (Date.parse(c.validTo) - Date.parse(c.validFrom)) / 1000;
}
