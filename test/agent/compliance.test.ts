// COMPLIANCE_POLICY=fips-140-2 on the agent's own TLS clients (the certificate service and xDS): TLS 1.2 with
// one of Istio's four FIPS suites on the P-256 curve, even against a server that prefers TLS 1.3; a server
// that only speaks TLS 1.3 is refused. Observed from a real TLS server on loopback.
import tls from 'node:tls';
import * as fs from 'node:fs';
import t, { type Test } from 'tap';
import { CaClient, TokenSource } from '../../src/agent/identity/ca-client';
import { XdsProxy } from '../../src/agent/xds-proxy';
import { FIPS_CIPHERS, type CompliancePolicy } from '../../src/lib/compliance';
import { makeServerCert } from '../helpers/agent';
import { tempDir } from '../helpers/temp';
import { waitFor } from '../helpers/wait';

interface Seen {
  protocol: string | null;
  cipher: string;
}

async function tlsServer(t: Test, opts: tls.TlsOptions): Promise<{ port: number; seen: Seen[]; errors: string[] }> {
  const seen: Seen[] = [];
  const errors: string[] = [];
  const server = tls.createServer({ ...opts, ALPNProtocols: ['h2'] }, (sock) => {
    seen.push({ protocol: sock.getProtocol(), cipher: sock.getCipher().name });
    sock.destroy();
  });
  server.on('tlsClientError', (e) => errors.push(e.message));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return { port: (server.address() as { port: number }).port, seen, errors };
}

function caClient(port: number, root: string, compliance: CompliancePolicy): CaClient {
  return new CaClient({
    ca: {
      address: `127.0.0.1:${port}`,
      plaintext: false,
      serverName: 'meshd.test.svc',
      rootCa: root,
      provCertDir: '',
      clusterId: 'c',
      headers: {},
      certSigner: '',
    },
    tokens: new TokenSource({ kind: 'none' }, '/'),
    cwd: '/',
    compliance,
    retryDelayMs: () => 1,
  });
}

t.test('the CA client: TLS 1.3 by default, TLS 1.2 with a FIPS suite on P-256 under fips-140-2', async (t) => {
  const dir = tempDir(t);
  const c = makeServerCert(dir, 'meshd.test.svc');
  const s = await tlsServer(t, { cert: fs.readFileSync(c.cert), key: fs.readFileSync(c.key) });
  const plain = caClient(s.port, c.ca, '');
  await plain.sign('csr', 60).catch(() => undefined);
  plain.close();
  t.equal(s.seen[0]?.protocol, 'TLSv1.3', 'no policy: Node chooses TLS 1.3');
  const fips = caClient(s.port, c.ca, 'fips-140-2');
  const before = s.seen.length;
  await fips.sign('csr', 60).catch(() => undefined);
  fips.close();
  const f = s.seen[before]!;
  t.equal(f.protocol, 'TLSv1.2', 'fips-140-2: TLS 1.2');
  t.ok(FIPS_CIPHERS.includes(f.cipher), `a FIPS suite (${f.cipher})`);
});

t.test('fips-140-2 offers only P-256 for the key exchange', async (t) => {
  const dir = tempDir(t);
  const c = makeServerCert(dir, 'meshd.test.svc');
  const x25519 = await tlsServer(t, { cert: fs.readFileSync(c.cert), key: fs.readFileSync(c.key), ecdhCurve: 'X25519', maxVersion: 'TLSv1.2' });
  const plain = caClient(x25519.port, c.ca, '');
  await plain.sign('csr', 60).catch(() => undefined);
  plain.close();
  t.equal(x25519.seen.length, 1, 'without a policy the client agrees on X25519');
  const fips = caClient(x25519.port, c.ca, 'fips-140-2');
  await t.rejects(fips.sign('csr', 60), /UNAVAILABLE/);
  fips.close();
  t.equal(x25519.seen.length, 1, 'under fips-140-2 no session with an X25519-only server');
});

t.test('fips-140-2 refuses a TLS 1.3-only server; the xDS client follows the same policy', async (t) => {
  const dir = tempDir(t);
  const c = makeServerCert(dir, 'meshd.test.svc');
  const only13 = await tlsServer(t, { cert: fs.readFileSync(c.cert), key: fs.readFileSync(c.key), minVersion: 'TLSv1.3' });
  const fips = caClient(only13.port, c.ca, 'fips-140-2');
  await t.rejects(fips.sign('csr', 60), /UNAVAILABLE/);
  fips.close();
  t.equal(only13.seen.length, 0, 'no TLS session established');

  const s = await tlsServer(t, { cert: fs.readFileSync(c.cert), key: fs.readFileSync(c.key) });
  const proxy = new XdsProxy({
    socketPath: `${dir}/XDS`,
    upstream: {
      address: `127.0.0.1:${s.port}`,
      clusterId: 'c',
      tls: { rootCerts: fs.readFileSync(c.ca), serverName: 'meshd.test.svc', compliance: 'fips-140-2' },
    },
  });
  const client = proxy.client();
  t.teardown(() => proxy.stop());
  const call = client.streamAggregatedResources();
  call.on('error', () => undefined);
  await waitFor(
    () => 'an xDS connection',
    () => s.seen.length > 0,
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  call.cancel();
  t.equal(s.seen[0]!.protocol, 'TLSv1.2');
  t.ok(FIPS_CIPHERS.includes(s.seen[0]!.cipher));
});
