// The built engine's admin /certs in Envoy's shape (admin.proto Certificates / CertificateDetails: one entry
// per TLS context, ca_cert and cert_chain with path, serial_number, subject_alt_names,
// days_until_expiration, valid_from, expiration_time), and the node's build version that
// `meshctl proxy-config bootstrap` prints as "Envoy Version" (it printed 0.0.0: issue 24).
import t from 'tap';
import { spawn, execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { built, DIST, exec, MESH } from '../helpers/binary';
import { freePort } from '../helpers/ports';
import { makePki } from './helpers';
import { waitForValue } from '../helpers/wait';

const skip = built() ? false : 'needs the built binary (node build.mjs)';

/** What openssl itself says of a certificate: the expectations do not come from the code under test. */
function opensslSays(file: string) {
  const out = execFileSync('openssl', ['x509', '-in', file, '-noout', '-serial', '-startdate', '-enddate'], { encoding: 'utf8' });
  const get = (k: string) => new RegExp(`^${k}=(.*)$`, 'm').exec(out)![1]!;
  const iso = (s: string) => new Date(s).toISOString().replace('.000Z', 'Z');
  return { serial: get('serial').replace(/^0+/, '').toLowerCase(), from: iso(get('notBefore')), to: iso(get('notAfter')) };
}

t.test('/certs lists the certificates each TLS context uses; bootstrap names the Envoy version', { skip, timeout: 60_000 }, async (t) => {
  const pki = makePki();
  t.teardown(() => pki.cleanup());
  const leaf = pki.leaf('server', ['URI:spiffe://cluster.local/ns/demo/sa/server', 'DNS:server.demo']);
  const [admin, port] = [await freePort(), await freePort()];
  const boot = path.join(pki.dir, 'bootstrap.json');
  writeFileSync(
    boot,
    JSON.stringify({
      node: { id: 'router~127.0.0.1~gw.demo~demo.svc.cluster.local', cluster: 'gw' },
      admin: { address: { socket_address: { address: '127.0.0.1', port_value: admin } } },
      static_resources: {
        listeners: [
          {
            name: 'tls',
            address: { socket_address: { address: '127.0.0.1', port_value: port } },
            filter_chains: [
              {
                filters: [
                  {
                    name: 'envoy.filters.network.tcp_proxy',
                    typed_config: {
                      '@type': 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy',
                      stat_prefix: 'tls',
                      cluster: 'up',
                    },
                  },
                ],
                transport_socket: {
                  name: 'envoy.transport_sockets.tls',
                  typed_config: {
                    '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext',
                    common_tls_context: {
                      tls_certificates: [{ certificate_chain: { filename: leaf.certFile }, private_key: { filename: leaf.keyFile } }],
                      validation_context: { trusted_ca: { filename: pki.ca.certFile } },
                    },
                  },
                },
              },
            ],
          },
        ],
        clusters: [
          {
            name: 'up',
            type: 'STATIC',
            connect_timeout: '1s',
            load_assignment: {
              cluster_name: 'up',
              endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: 9 } } } }] }],
            },
            transport_socket: {
              name: 'envoy.transport_sockets.tls',
              typed_config: {
                '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
                common_tls_context: { validation_context: { trusted_ca: { inline_string: pki.ca.cert } } },
              },
            },
          },
        ],
      },
    }),
  );
  const child = spawn(MESH, ['agent', 'envoy', '-c', boot, '--base-id', String(process.pid)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let logs = '';
  child.stdout.on('data', (d) => (logs += d));
  child.stderr.on('data', (d) => (logs += d));
  t.teardown(() => void child.kill('SIGKILL'));
  const get = async (p: string) => (await fetch(`http://127.0.0.1:${admin}${p}`)).text();
  await waitForValue(`the engine's admin (${logs})`, async () => (await get('/ready').catch(() => '')).startsWith('LIVE'), {
    timeoutMs: 20_000,
    intervalMs: 20,
  });

  const certs = JSON.parse(await get('/certs')) as {
    certificates: Array<{ ca_cert: Array<Record<string, unknown>>; cert_chain: Array<Record<string, unknown>> }>;
  };
  const ca = opensslSays(pki.ca.certFile);
  const server = opensslSays(leaf.certFile);
  const days = (iso: string) => String(Math.floor((Date.parse(iso) - Date.now()) / 86_400_000));
  const want = (c: typeof ca, p: string, sans: unknown[]) => ({
    path: p,
    serial_number: c.serial,
    subject_alt_names: sans,
    days_until_expiration: days(c.to),
    valid_from: c.from,
    expiration_time: c.to,
  });
  const listener = {
    ca_cert: [want(ca, pki.ca.certFile, [])],
    cert_chain: [want(server, leaf.certFile, [{ dns: 'server.demo' }, { uri: 'spiffe://cluster.local/ns/demo/sa/server' }])],
  };
  const cluster = { ca_cert: [want(ca, '<inline>', [])], cert_chain: [] };
  const sortKey = (x: { cert_chain: unknown[] }) => x.cert_chain.length;
  t.same(
    certs.certificates.sort((a, b) => sortKey(a) - sortKey(b)),
    [cluster, listener],
    'one entry per TLS context, as Envoy lists them',
  );

  const dump = path.join(pki.dir, 'dump.json');
  writeFileSync(dump, await get('/config_dump'));
  const r = await exec(path.join(DIST, 'meshctl'), ['proxy-config', 'bootstrap', '-f', dump, '-o', 'short']);
  t.equal(r.code, 0, r.stderr);
  // Istio 1.26 runs Envoy 1.34; istioctl prints major.minor.patch then the build metadata (status/type/ssl)
  t.match(r.stdout, /^Envoy Version:\s+1\.34\.\d+\/(Clean|Modified|unknown)\/RELEASE\/\S+$/m);
});
