// Gateway credentials over ADS with the built programs and no cluster (Istio's SecretGen): the daemon
// reads Secrets from --configDir and answers the gateway engine's `kubernetes://<credentialName>` SDS
// requests on its ADS stream. A SIMPLE server presents the certificate of its Secret; editing the Secret
// file changes the certificate served, with no restart of either program; a MUTUAL server trusts the CA
// of the Secret's ca.crt and refuses a client without a certificate from it. Certificates are made here
// with openssl.
import { X509Certificate } from 'node:crypto';
import * as fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import t from 'tap';
import { built } from '../helpers/binary';
import { freePort } from '../helpers/ports';
import { startGateway, type GatewayPorts } from '../helpers/gateway';
import { gatewayYaml, virtualServiceDoc } from '../helpers/mesh-yaml';
import { openssl } from '../ca/helpers';
import { waitFor } from '../helpers/wait';
import { EC_P256_KEY, signWith } from '../helpers/openssl';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

function config(p: GatewayPorts, simplePort: number, mutualPort: number): string {
  const servers = `  - port: {number: ${simplePort}, name: https, protocol: HTTPS}
    hosts: ["*"]
    tls: {mode: SIMPLE, credentialName: web-cert}
  - port: {number: ${mutualPort}, name: https-mutual, protocol: HTTPS}
    hosts: ["*"]
    tls: {mode: MUTUAL, credentialName: mutual-cert}
`;
  return gatewayYaml(p, virtualServiceDoc('all'), { servers, location: 'MESH_EXTERNAL' });
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

/** A kubernetes.io/tls Secret in mesh-system, as `kubectl create secret tls` writes it (plus ca.crt). */
function secretYaml(name: string, cert: string, key: string, ca?: string): string {
  return `apiVersion: v1
kind: Secret
metadata: {name: ${name}, namespace: mesh-system}
type: kubernetes.io/tls
data:
  tls.crt: ${b64(cert)}
  tls.key: ${b64(key)}
${ca ? `  ca.crt: ${b64(ca)}\n` : ''}`;
}

interface Pem {
  cert: string;
  key: string;
}

/** A self-signed server certificate with CN `cn` and SAN gateway.example.com. */
function selfSigned(dir: string, cn: string): Pem {
  const base = path.join(dir, cn);
  openssl([
    'req',
    '-x509',
    ...EC_P256_KEY,
    '-subj',
    `/CN=${cn}`,
    '-addext',
    'subjectAltName=DNS:gateway.example.com',
    '-days',
    '1',
    '-keyout',
    `${base}.key`,
    '-out',
    `${base}.crt`,
  ]);
  return { cert: fs.readFileSync(`${base}.crt`, 'utf8'), key: fs.readFileSync(`${base}.key`, 'utf8') };
}

/** A certificate for `cn` signed by `ca`. */
function signed(dir: string, cn: string, ca: Pem): Pem {
  const base = path.join(dir, cn);
  fs.writeFileSync(`${base}-ca.crt`, ca.cert);
  fs.writeFileSync(`${base}-ca.key`, ca.key);
  openssl(['req', ...EC_P256_KEY, '-subj', `/CN=${cn}`, '-keyout', `${base}.key`, '-out', `${base}.csr`]);
  openssl([...signWith(`${base}.csr`, `${base}-ca.crt`, `${base}-ca.key`), '-days', '1', '-out', `${base}.crt`]);
  return { cert: fs.readFileSync(`${base}.crt`, 'utf8'), key: fs.readFileSync(`${base}.key`, 'utf8') };
}

interface Reply {
  status: number;
  body: string;
  peer: X509Certificate;
}

function httpsGet(
  port: number,
  o: Pick<https.RequestOptions, 'ca' | 'cert' | 'key' | 'rejectUnauthorized' | 'checkServerIdentity'> = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', port, path: '/hello', servername: 'gateway.example.com', agent: false, rejectUnauthorized: false, ...o },
      (res) => {
        const peer = (res.socket as TLSSocket).getPeerX509Certificate();
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => (peer ? resolve({ status: res.statusCode ?? 0, body, peer }) : reject(new Error('no server certificate'))));
      },
    );
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('timed out')));
    req.end();
  });
}

t.test('credentialName Secrets from --configDir are served over ADS, and edits reach the gateway without a restart', async (t) => {
  const simplePort = await freePort();
  const mutualPort = await freePort();
  const certs = fs.mkdtempSync(path.join(process.env['TMPDIR'] ?? '/tmp', 'mesh-gw-creds-'));
  t.teardown(() => fs.rmSync(certs, { recursive: true, force: true }));
  const first = selfSigned(certs, 'first');
  const ca = selfSigned(certs, 'client-ca');
  const mutualServer = signed(certs, 'mutual-server', ca);
  const client = signed(certs, 'client', ca);
  const stranger = signed(certs, 'stranger', selfSigned(certs, 'other-ca'));

  const rig = await startGateway(t, {
    config: (p) => {
      // the Secrets sit beside the Gateway, as a user's folder would hold them
      return config(p, simplePort, mutualPort);
    },
  });
  // Written after the start: the credential arrives with the file, over the running ADS stream.
  fs.writeFileSync(path.join(rig.configDir, 'web-cert.yaml'), secretYaml('web-cert', first.cert, first.key));
  fs.writeFileSync(path.join(rig.configDir, 'mutual-cert.yaml'), secretYaml('mutual-cert', mutualServer.cert, mutualServer.key, ca.cert));

  let reply: Reply | undefined;
  await waitFor(
    () => `no HTTPS answer with the first certificate:\n${rig.agentOut().slice(-3000)}\n--- daemon:\n${rig.daemon.log().slice(-3000)}`,
    async () => {
      reply = await httpsGet(simplePort, { ca: first.cert }).catch(() => undefined);
      return reply?.status === 200;
    },
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  t.equal(reply!.peer.fingerprint256, new X509Certificate(first.cert).fingerprint256, "the SIMPLE server presents the Secret's certificate");
  t.match(JSON.parse(reply!.body), { workload: 'demo', path: '/hello' }, 'and routes to the backend');

  // The Secret file is edited: the next connection gets the new certificate.
  const second = selfSigned(certs, 'second');
  fs.writeFileSync(path.join(rig.configDir, 'web-cert.yaml'), secretYaml('web-cert', second.cert, second.key));
  const want = new X509Certificate(second.cert).fingerprint256;
  await waitFor(
    () => `the edited certificate was not served:\n${rig.daemon.log().slice(-3000)}`,
    async () => (await httpsGet(simplePort, { ca: second.cert }).catch(() => undefined))?.peer.fingerprint256 === want,
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  t.pass('the edited Secret is served without a restart');

  // MUTUAL: the `mutual-cert-cacert` companion resource carries ca.crt.
  await waitFor(
    () => rig.daemon.log().slice(-3000),
    async () => (await httpsGet(mutualPort, { ca: ca.cert, cert: client.cert, key: client.key }).catch(() => undefined))?.status === 200,
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  const ok = await httpsGet(mutualPort, {
    ca: ca.cert,
    cert: client.cert,
    key: client.key,
    rejectUnauthorized: true,
    checkServerIdentity: () => undefined,
  });
  t.equal(ok.peer.fingerprint256, new X509Certificate(mutualServer.cert).fingerprint256, 'MUTUAL presents its key pair');
  await t.rejects(httpsGet(mutualPort, { ca: ca.cert }), 'a client without a certificate is refused');
  await t.rejects(httpsGet(mutualPort, { ca: ca.cert, cert: stranger.cert, key: stranger.key }), 'a client certificate from another CA is refused');
});
