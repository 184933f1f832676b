// The daemon's own workload tokens (issue 24 item 8). Unit: the token is a standard ES256 JWT that an
// independent implementation (jose) verifies, with a Kubernetes service-account token's claims, and its kid
// is the RFC 7638 thumbprint jose computes; the authenticator maps it to the SPIFFE identity and refuses
// wrong audiences, expired tokens, other keys and other issuers, and stops accepting old tokens once the key
// is replaced. Built binaries: a daemon that also has JWT_RULE signs CSRs for a token `meshctl x workload
// entry configure --ca-dir` minted, and for the JWT_RULE issuer's token too.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import * as jose from 'jose';
import t from 'tap';
import { built, DIST } from '../helpers/binary';
import { DaemonTokenAuthenticator } from '../../src/ca/authn/daemon-token';
import type { AuthRequest } from '../../src/ca/authn/types';
import { DAEMON_TOKEN_ISSUER, keyThumbprint, mintWorkloadToken, TOKEN_KEY_FILE, tokenSigningKey, TokenKeyError } from '../../src/ca/token';
import {
  caClient,
  createCertificate,
  daemonDirs,
  lifetimeSeconds,
  opensslCsr,
  opensslPluginCa,
  opensslVerify,
  sans,
  startIssuer,
  startMockDaemon,
} from './helpers';
import { tempDir } from '../helpers/temp';

function bearer(token: string): AuthRequest {
  return { secure: true, remoteAddress: '127.0.0.1:1', header: (n) => (n === 'authorization' ? [`Bearer ${token}`] : []) };
}

const mint = (key: crypto.KeyObject, o: Partial<Parameters<typeof mintWorkloadToken>[1]> = {}) =>
  mintWorkloadToken(key, { namespace: 'demo', serviceAccount: 'vm', audiences: ['mesh-ca'], ttlSeconds: 3600, ...o });

t.test("the token: a JWT jose verifies, with a Kubernetes service-account token's claims", async (t) => {
  const dir = tempDir(t);
  const key = tokenSigningKey(dir, true)!;
  t.equal(fs.statSync(path.join(dir, TOKEN_KEY_FILE)).mode & 0o777, 0o600, 'the key file is 0600');
  t.equal(keyThumbprint(tokenSigningKey(dir, true)!), keyThumbprint(key), 'a second caller reads the same key');
  const token = mint(key);
  const { payload, protectedHeader } = await jose.jwtVerify(token, crypto.createPublicKey(key), { issuer: DAEMON_TOKEN_ISSUER, audience: 'mesh-ca' });
  t.equal(protectedHeader.alg, 'ES256');
  t.equal(
    protectedHeader.kid,
    await jose.calculateJwkThumbprint(crypto.createPublicKey(key).export({ format: 'jwk' }) as jose.JWK),
    'kid is the RFC 7638 thumbprint',
  );
  t.equal(payload.sub, 'system:serviceaccount:demo:vm');
  t.same(payload['kubernetes.io'], { namespace: 'demo', serviceaccount: { name: 'vm' } });
  t.equal(payload.exp! - payload.iat!, 3600);
  t.ok(payload.jti, 'each token has an id');

  const rsaDir = tempDir(t);
  fs.writeFileSync(
    path.join(rsaDir, TOKEN_KEY_FILE),
    crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }),
  );
  t.throws(
    () => tokenSigningKey(rsaDir, false),
    new TokenKeyError(`${path.join(rsaDir, TOKEN_KEY_FILE)}: the token signing key must be an ECDSA P-256 key (ES256), got rsa`),
  );
  t.throws(() => mint(key, { ttlSeconds: 0 }), /positive lifetime/);
});

t.test('the authenticator', async (t) => {
  const dir = tempDir(t);
  const key = tokenSigningKey(dir, true)!;
  let now = Date.now();
  const a = new DaemonTokenAuthenticator({ dir, audiences: ['mesh-ca'], trustDomain: () => 'example.org', now: () => now });
  t.same((await a.authenticate(bearer(mint(key)))).identities, ['spiffe://example.org/ns/demo/sa/vm']);
  await t.rejects(a.authenticate(bearer(mint(key, { audiences: ['other'] }))), /invalid audiences \["other"\]/);
  await t.rejects(a.authenticate(bearer(mint(key, { nowMs: now - 7200_000 }))), /token is expired/);
  await t.rejects(a.authenticate(bearer(mint(key, { namespace: 'a:b' }))), /invalid sub system:serviceaccount:a:b:vm/);
  const otherKey = tokenSigningKey(tempDir(t), true)!;
  await t.rejects(a.authenticate(bearer(mint(otherKey))), /failed to verify the token .*no key with kid/);
  const [h, p] = mint(key).split('.');
  const forged = `${h}.${p}.${mint(otherKey).split('.')[2]}`;
  await t.rejects(a.authenticate(bearer(forged)), /failed to verify signature/);
  const foreign = await new jose.SignJWT({ sub: 'system:serviceaccount:demo:vm', aud: 'mesh-ca' })
    .setProtectedHeader({ alg: 'ES256' })
    .setIssuer('https://issuer.example.com')
    .setExpirationTime('1h')
    .sign(key);
  await t.rejects(
    a.authenticate(bearer(foreign)),
    /not a token of this daemon \(iss "https:\/\/issuer\.example\.com"/,
    'another issuer is left to the other authenticators',
  );

  // Replacing the key revokes the old tokens within a second.
  const old = mint(key);
  fs.rmSync(path.join(dir, TOKEN_KEY_FILE));
  const fresh = tokenSigningKey(dir, true)!;
  t.same(
    (await a.authenticate(bearer(old))).identities,
    ['spiffe://example.org/ns/demo/sa/vm'],
    'still accepted before the key file is looked at again',
  );
  now += 1_000;
  await t.rejects(a.authenticate(bearer(old)), /no key with kid/, 'refused once the new key is read');
  t.same((await a.authenticate(bearer(mint(fresh)))).identities, ['spiffe://example.org/ns/demo/sa/vm'], "the new key's tokens work");
  fs.rmSync(path.join(dir, TOKEN_KEY_FILE));
  now += 1_000;
  await t.rejects(a.authenticate(bearer(mint(fresh))), /no key/, 'no key file: nothing verifies');

  // A key made after the last look (meshctl --ca-dir right after the daemon started) works at once: a token no
  // loaded key verifies makes the file be looked at again, whatever the interval.
  const late = tokenSigningKey(dir, true)!;
  t.same(
    (await a.authenticate(bearer(mint(late)))).identities,
    ['spiffe://example.org/ns/demo/sa/vm'],
    'a key made within the interval verifies at once',
  );
});

t.test("built daemon with JWT_RULE too: meshctl's --ca-dir token and the issuer's token both get certificates", { skip: !built() }, async (t) => {
  const { dir, cwd, cfg } = daemonDirs(t);
  const issuer = await startIssuer(t);
  const d = await startMockDaemon(t, { JWT_RULE: issuer.rule() }, { cwd, cfg });
  fs.writeFileSync(
    path.join(dir, 'wg.yaml'),
    'apiVersion: networking.mesh.io/v1\nkind: WorkloadGroup\nmetadata: {name: vm, namespace: demo}\nspec:\n  template: {serviceAccount: vm-sa}\n',
  );
  const r = spawnSync(
    path.join(DIST, 'meshctl'),
    ['x', 'workload', 'entry', 'configure', '-f', 'wg.yaml', '-o', 'vm', '--ca-dir', path.join(cwd, 'var/lib/mesh/ca')],
    {
      cwd: dir,
      encoding: 'utf8',
      env: { PATH: process.env.PATH, HOME: dir },
    },
  );
  t.equal(r.status, 0, r.stderr);
  t.equal(r.stdout, 'Configuration generation into directory vm was successful\n');
  t.equal(r.stderr, 'Warning: a security token for namespace "demo" and service account "vm-sa" has been generated and stored at "vm/mesh-token"\n');

  const root = fs.readFileSync(path.join(dir, 'vm/root-cert.pem'), 'utf8');
  const client = caClient(t, d.secureGrpc!, root);
  const { csr } = opensslCsr(dir, 'ec');
  const ours = await createCertificate(client, { csr, token: fs.readFileSync(path.join(dir, 'vm/mesh-token'), 'utf8') });
  t.same(sans(ours[0]!), ['URI:spiffe://cluster.local/ns/demo/sa/vm-sa'], "the --ca-dir token's identity");
  const theirs = await createCertificate(client, { csr, token: await issuer.token({ ns: 'demo', sa: 'other' }) });
  t.same(sans(theirs[0]!), ['URI:spiffe://cluster.local/ns/demo/sa/other'], 'JWT_RULE still works beside it');
  t.match(d.log(), /trusting workload tokens signed by .*token-key\.pem/);

  const bad = spawnSync(
    path.join(DIST, 'meshctl'),
    ['x', 'workload', 'entry', 'configure', '-f', 'wg.yaml', '-o', 'vm2', '--ca-dir', path.join(dir, 'nowhere')],
    { cwd: dir, encoding: 'utf8', env: { PATH: process.env.PATH, HOME: dir } },
  );
  t.equal(bad.status, 1);
  t.match(bad.stderr, /^Error: --ca-dir .*nowhere: no such directory/);
  const noFile = spawnSync(
    path.join(DIST, 'meshctl'),
    ['x', 'workload', 'entry', 'configure', '--name', 'vm', '-n', 'demo', '-o', 'vm2', '--ca-dir', 'x'],
    { cwd: dir, encoding: 'utf8', env: { PATH: process.env.PATH, HOME: dir } },
  );
  t.match(noFile.stderr, /^Error: --ca-dir \(no cluster\) needs the WorkloadGroup as a file/);
});

t.test('built daemon with a plug-in CA: the token key and the operator certificate come from ROOT_CA_DIR', { skip: !built() }, async (t) => {
  const { dir, cwd, cfg } = daemonDirs(t);
  const cacerts = path.join(dir, 'cacerts');
  const pki = opensslPluginCa(cacerts);
  const d = await startMockDaemon(t, { ROOT_CA_DIR: cacerts }, { cwd, cfg });
  t.notOk(fs.existsSync(path.join(cacerts, TOKEN_KEY_FILE)), "the daemon writes nothing into the operator's ROOT_CA_DIR");
  t.notOk(fs.existsSync(path.join(cwd, 'var/lib/mesh/ca')), 'nor a self-signed store');

  const meshctl = (args: string[]) =>
    spawnSync(path.join(DIST, 'meshctl'), args, { cwd: dir, encoding: 'utf8', env: { PATH: process.env.PATH, HOME: dir } });
  fs.writeFileSync(
    path.join(dir, 'wg.yaml'),
    'kind: WorkloadGroup\nmetadata: {name: vm, namespace: demo}\nspec: {template: {serviceAccount: vm-sa}}\n',
  );
  const r = meshctl(['x', 'workload', 'entry', 'configure', '-f', 'wg.yaml', '-o', 'vm', '--ca-dir', cacerts]);
  t.equal(r.status, 0, r.stderr);
  t.ok(fs.existsSync(path.join(cacerts, TOKEN_KEY_FILE)), 'meshctl made the token key beside the plug-in material');
  t.equal(fs.readFileSync(path.join(dir, 'vm/root-cert.pem'), 'utf8'), pki.rootPem, 'root-cert.pem is the plug-in root');
  const client = caClient(t, d.secureGrpc!, pki.rootPem);
  const { csr } = opensslCsr(dir, 'rsa');
  const chain = await createCertificate(client, { csr, token: fs.readFileSync(path.join(dir, 'vm/mesh-token'), 'utf8') });
  t.same(sans(chain[0]!), ['URI:spiffe://cluster.local/ns/demo/sa/vm-sa'], 'the daemon read the key meshctl made');
  t.ok(opensslVerify(dir, pki.rootPem, chain[0]!, pki.intermediatePem).ok, 'signed by the intermediate');

  fs.writeFileSync(path.join(dir, 'mesh.yaml'), 'trustDomain: example.org\n');
  const c = meshctl([
    'x',
    'ca',
    'client-cert',
    '--ca-dir',
    cacerts,
    '-o',
    'ops',
    '--meshConfigFile',
    'mesh.yaml',
    '-n',
    'ops',
    '-s',
    'alice',
    '--ttl',
    '2h',
  ]);
  t.equal(c.status, 0, c.stderr);
  t.equal(c.stdout, 'A client certificate for spiffe://example.org/ns/ops/sa/alice (valid 2 h) is in ops: use it with --cert-dir ops\n');
  const leaf = fs.readFileSync(path.join(dir, 'ops/cert-chain.pem'), 'utf8');
  t.same(sans(leaf), ['URI:spiffe://example.org/ns/ops/sa/alice']);
  t.equal(lifetimeSeconds(leaf), 2 * 3600 + 120, "--ttl, plus the CA's two minutes of clock-skew grace before issuance");
  const [first, ...rest] = leaf.split(/(?<=-----END CERTIFICATE-----\n)/);
  t.equal(rest.join(''), pki.intermediatePem + pki.rootPem, 'cert-chain.pem: the leaf, then the plug-in chain');
  t.ok(
    opensslVerify(dir, fs.readFileSync(path.join(dir, 'ops/root-cert.pem'), 'utf8'), first!, rest.join('')).ok,
    'it verifies against root-cert.pem',
  );
  t.equal(fs.statSync(path.join(dir, 'ops/key.pem')).mode & 0o777, 0o600, 'key.pem is private');

  t.match(meshctl(['x', 'ca', 'client-cert', '-o', 'x']).stderr, /^Error: expecting --ca-dir/);
  t.match(meshctl(['x', 'ca', 'client-cert', '--ca-dir', cfg, '-o', 'x']).stderr, /^Error: --ca-dir .*cfg: not a CA directory: no ca-cert\.pem/);
});
