// Self-signed root rotation in the built daemon (CA_SELF_SIGNED_ROOT_CERT_CHECK_INTERVAL, _GRACE_PERIOD_
// PERCENTILE, no jitter): with a 30 s root the rotator re-issues it in its grace period over the same key,
// stores and publishes it, re-issues the serving certificate — and certificates from before the rotation
// still verify against the new root (and new ones against the old root).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { X509Certificate } from 'node:crypto';
import t from 'tap';
import { built } from '../helpers/binary';
import { caClient, createCertificate, opensslCsr, opensslVerify, startIssuer, daemonDirs, startMockDaemon } from './helpers';
import { waitFor } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first (npm test does)');

t.test('the self-signed root is rotated over the same key and stays trusted', async (t) => {
  const { dir, cwd, cfg } = daemonDirs(t);
  const issuer = await startIssuer(t);
  const env = {
    JWT_RULE: issuer.rule(),
    CA_SELF_SIGNED_CA_CERT_TTL: '30s',
    CA_SELF_SIGNED_ROOT_CERT_CHECK_INTERVAL: '1s',
    CA_SELF_SIGNED_ROOT_CERT_GRACE_PERIOD_PERCENTILE: '60',
    CA_ENABLE_JITTER_FOR_ROOT_CERT_ROTATOR: 'false',
  };
  const d = await startMockDaemon(t, env, { cwd, cfg });
  const rootFile = path.join(cwd, 'var/run/secrets/mesh/root-cert.pem');
  const oldRoot = fs.readFileSync(rootFile, 'utf8');
  const oldKey = fs.readFileSync(path.join(cwd, 'var/lib/mesh/ca/ca-key.pem'), 'utf8');
  const ca = caClient(t, d.secureGrpc!, oldRoot);
  const { csr } = opensslCsr(dir, 'ec');
  const before = await createCertificate(ca, { csr, token: await issuer.token({}) });

  // 60 % grace of 30 s: due 12 s after the root was made.
  await waitFor(
    () => `the root was not rotated:\n${d.log()}`,
    () => fs.readFileSync(rootFile, 'utf8') !== oldRoot,
    { timeoutMs: 25_000, intervalMs: 50 },
  );
  const newRoot = fs.readFileSync(rootFile, 'utf8');
  // The daemon writes the root before it logs the rotation, and its log reaches us through a pipe.
  await waitFor(
    () => `no rotation log line:\n${d.log()}`,
    () => /Root certificate rotation is completed successfully/.test(d.log()),
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  t.match(d.log(), /Root certificate rotation is completed successfully/);
  t.equal(fs.readFileSync(path.join(cwd, 'var/lib/mesh/ca/ca-cert.pem'), 'utf8'), newRoot, 'the store holds the new root');
  t.equal(fs.readFileSync(path.join(cwd, 'var/lib/mesh/ca/ca-key.pem'), 'utf8'), oldKey, 'over the same key');
  const o = new X509Certificate(oldRoot);
  const n = new X509Certificate(newRoot);
  t.equal(n.subject, o.subject);
  t.ok(Date.parse(n.validTo) > Date.parse(o.validTo), 'a later expiry');

  const after = await createCertificate(caClient(t, d.secureGrpc!, newRoot), { csr, token: await issuer.token({}) });
  t.equal(after.at(-1), newRoot, 'new certificates come with the new root');
  t.ok(opensslVerify(dir, newRoot, before[0]!).ok, 'a certificate from before the rotation verifies against the new root');
  t.ok(opensslVerify(dir, oldRoot, after[0]!).ok, 'a new certificate verifies against the old root a workload may still hold');
  await waitFor(
    () => d.log(),
    () => /regenerated meshd dns cert/.test(d.log()),
    { timeoutMs: 10_000, intervalMs: 50 },
  );
});
