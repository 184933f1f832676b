// A plug-in CA in ROOT_CA_DIR, made by the test with the openssl CLI (root → intermediate): the built daemon
// signs with the intermediate, answers leaf → intermediate → … → root, serves its own certificate from it,
// refuses to start on a partial or mismatched set naming the file, and picks up a new intermediate.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { X509Certificate } from 'node:crypto';
import t from 'tap';
import { built, DIST, exec } from '../helpers/binary';
import { metricValue } from '../helpers/prometheus';
import {
  caClient,
  createCertificate,
  openssl,
  opensslCsr,
  opensslPluginCa,
  opensslVerify,
  sans,
  startIssuer,
  daemonDirs,
  startMockDaemon,
} from './helpers';
import { tempDir } from '../helpers/temp';
import { ephemeralListeners } from '../helpers/daemon';
import { waitFor } from '../helpers/wait';
import { signWith } from '../helpers/openssl';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first (npm test does)');

const EPHEMERAL = ephemeralListeners();

async function refusal(cwd: string, cfg: string, env: Record<string, string>): Promise<{ code: number | null; last: string }> {
  const r = await exec(path.join(DIST, 'pilot-discovery'), ['discovery', '--configDir', cfg, '--registries', 'Mock', ...EPHEMERAL], {
    cwd,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
  });
  return { code: r.code, last: r.stderr.trimEnd().split('\n').pop() ?? '' };
}

t.test('plug-in CA: chains end to end (RSA and ECDSA intermediates)', async (t) => {
  for (const ec of [false, true]) {
    await t.test(ec ? 'ECDSA P-256 intermediate' : 'RSA 2048 intermediate', async (t) => {
      const { dir, cwd, cfg } = daemonDirs(t);
      const cacerts = path.join(dir, 'cacerts');
      const pki = opensslPluginCa(cacerts, { ec });
      const issuer = await startIssuer(t);
      const d = await startMockDaemon(t, { ROOT_CA_DIR: cacerts, JWT_RULE: issuer.rule() }, { cwd, cfg });
      t.match(d.log(), /Use local CA certificate from ROOT_CA_DIR/);
      t.equal(fs.readFileSync(path.join(cwd, 'var/run/secrets/mesh/root-cert.pem'), 'utf8'), pki.rootPem, 'the published root is root-cert.pem');
      t.notOk(fs.existsSync(path.join(cwd, 'var/lib/mesh/ca')), 'no self-signed root is made');
      const m = await (await fetch(`http://${d.monitoring}/metrics`)).text();
      t.equal(
        metricValue(m, 'ca_server_cert_chain_expiry_timestamp'),
        Date.parse(new X509Certificate(pki.intermediatePem).validTo) / 1000,
        "the chain expiry is the intermediate's",
      );
      t.equal(metricValue(m, 'ca_server_root_cert_expiry_timestamp'), Date.parse(new X509Certificate(pki.rootPem).validTo) / 1000);

      const ca = caClient(t, d.secureGrpc!, pki.rootPem);
      for (const kind of ['rsa', 'ec'] as const) {
        const { csr } = opensslCsr(dir, kind, { san: 'URI:spiffe://cluster.local/ns/kube-system/sa/admin' });
        const chain = await createCertificate(ca, { csr, token: await issuer.token({ ns: 'shop', sa: 'cart' }) });
        t.equal(chain.length, 4, `${kind}: leaf, cert-chain.pem (intermediate, root), then the root bundle (as Istio answers)`);
        t.equal(chain[1], pki.intermediatePem, `${kind}: the intermediate follows the leaf`);
        t.equal(chain[3], pki.rootPem, `${kind}: the root bundle is last`);
        t.same(sans(chain[0]!), ['URI:spiffe://cluster.local/ns/shop/sa/cart'], `${kind}: the caller's identity`);
        const v = opensslVerify(dir, pki.rootPem, chain[0]!, chain[1]!);
        t.ok(v.ok, `${kind}: openssl verify -CAfile root -untrusted intermediate leaf (${v.out})`);
        t.notOk(opensslVerify(dir, pki.rootPem, chain[0]!).ok, `${kind}: and not without the intermediate (the root did not sign the leaf)`);
        const alg = openssl(['x509', '-noout', '-text'], { input: chain[0]! });
        t.match(
          alg,
          ec ? /Signature Algorithm: ecdsa-with-SHA256/ : /Signature Algorithm: sha256WithRSAEncryption/,
          `${kind}: signed with the intermediate's key type`,
        );
      }
    });
  }
});

t.test('plug-in CA: a partial or mismatched set stops the daemon, naming the file', async (t) => {
  const dir = tempDir(t);
  const cfg = path.join(dir, 'cfg');
  fs.mkdirSync(cfg);
  const good = path.join(dir, 'good');
  opensslPluginCa(good);
  const other = path.join(dir, 'other');
  opensslPluginCa(other, { cn: 'another-root' });
  const variant = (name: string, change: (d: string) => void) => {
    const d = path.join(dir, name);
    fs.cpSync(good, d, { recursive: true });
    change(d);
    return d;
  };
  const cases: Array<[string, string, RegExp]> = [
    [
      'missing key',
      variant('nokey', (d) => fs.rmSync(path.join(d, 'ca-key.pem'))),
      /^Error: ROOT_CA_DIR .*\/nokey: incomplete signing CA bundle detected: missing .*\/nokey\/ca-key\.pem$/,
    ],
    [
      'missing chain',
      variant('nochain', (d) => fs.rmSync(path.join(d, 'cert-chain.pem'))),
      /incomplete signing CA bundle detected: missing .*\/nochain\/cert-chain\.pem$/,
    ],
    [
      'key of another certificate',
      variant('wrongkey', (d) => fs.copyFileSync(path.join(other, 'ca-key.pem'), path.join(d, 'ca-key.pem'))),
      /\/wrongkey\/ca-key\.pem does not match .*\/wrongkey\/ca-cert\.pem/,
    ],
    [
      'root that did not sign it',
      variant('wrongroot', (d) => fs.copyFileSync(path.join(other, 'root-cert.pem'), path.join(d, 'root-cert.pem'))),
      /\/wrongroot\/ca-cert\.pem: cannot verify the cert with the provided root chain/,
    ],
    [
      'garbage certificate',
      variant('garbage', (d) => fs.writeFileSync(path.join(d, 'ca-cert.pem'), 'hello')),
      /\/garbage\/ca-cert\.pem: no PEM certificate found/,
    ],
  ];
  for (const [name, rootCaDir, msg] of cases) {
    const cwd = fs.mkdtempSync(path.join(dir, 'cwd-'));
    const r = await refusal(cwd, cfg, { ROOT_CA_DIR: rootCaDir });
    t.equal(r.code, 255, `${name}: exit code`);
    t.match(r.last, msg, `${name}: the error names the file`);
  }
});

t.test('plug-in CA: a new intermediate under the same root is picked up; a new root needs MESH_MULTIROOT_MESH', async (t) => {
  const { dir, cwd, cfg } = daemonDirs(t);
  const cacerts = path.join(dir, 'cacerts');
  const pki = opensslPluginCa(cacerts);
  const issuer = await startIssuer(t);
  const d = await startMockDaemon(t, { ROOT_CA_DIR: cacerts, JWT_RULE: issuer.rule() }, { cwd, cfg });
  const ca = caClient(t, d.secureGrpc!, pki.rootPem);
  const token = await issuer.token({});
  const { csr } = opensslCsr(dir, 'ec');
  const first = await createCertificate(ca, { csr, token });

  // A second intermediate from the same root, written the way a mounted Secret changes: files swapped in.
  const staging = path.join(dir, 'staging');
  fs.mkdirSync(staging);
  fs.writeFileSync(path.join(staging, 'ca.ext'), 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign,digitalSignature\n');
  openssl(
    ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca-key.pem', '-out', 'ca.csr', '-subj', '/O=Plugin Intermediate/CN=second-intermediate'],
    { cwd: staging },
  );
  openssl(
    [
      ...signWith('ca.csr', pki.rootCert, pki.rootKey),
      '-CAserial',
      path.join(staging, 'serial'),
      '-out',
      'ca-cert.pem',
      '-days',
      '10',
      '-extfile',
      'ca.ext',
    ],
    { cwd: staging },
  );
  const second = fs.readFileSync(path.join(staging, 'ca-cert.pem'), 'utf8');
  fs.writeFileSync(path.join(staging, 'cert-chain.pem'), second + pki.rootPem);
  for (const f of ['ca-key.pem', 'ca-cert.pem', 'cert-chain.pem']) fs.renameSync(path.join(staging, f), path.join(cacerts, f));

  let renewed: string[] = [];
  await waitFor(
    () => `the new intermediate was not used:\n${d.log()}`,
    async () => {
      renewed = await createCertificate(ca, { csr, token });
      return renewed[1] === second;
    },
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  t.ok(opensslVerify(dir, pki.rootPem, renewed[0]!, renewed[1]!).ok, 'certificates now chain through the second intermediate');
  t.match(new X509Certificate(renewed[0]!).issuer, /CN=second-intermediate/);
  t.ok(opensslVerify(dir, pki.rootPem, first[0]!, first[1]!).ok, 'earlier certificates still verify against the unchanged root');
  t.match(d.log(), /detected the newly added intermediate CA/);

  // Another root: refused without MESH_MULTIROOT_MESH; signing continues with what it had.
  const other = opensslPluginCa(path.join(dir, 'other'), { cn: 'another-root' });
  fs.copyFileSync(other.rootCert, path.join(cacerts, 'root-cert.pem'));
  await waitFor(
    () => `no refusal logged:\n${d.log()}`,
    () => /Multi root is disabled/.test(d.log()),
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  const still = await createCertificate(ca, { csr, token });
  t.equal(still[1], second, 'the last good material keeps signing');
  t.equal(fs.readFileSync(path.join(cwd, 'var/run/secrets/mesh/root-cert.pem'), 'utf8'), pki.rootPem, 'the published root is unchanged');
});
