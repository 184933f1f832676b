// The README's "Running sidecars without a cluster", run line by line as printed (issue 24 item 8): the built
// daemon, meshctl minting a workload token from the daemon's CA directory (no JWT_RULE, no issuer, no
// cluster), the agent getting its certificate with it, a request through the gateway, then an operator
// certificate from the same directory used by meshctl over mutual TLS on :15012. The lines bind fixed ports
// (15010, 15012, 15021, 18080, 19090…), so they run in a network namespace of their own, in a scratch
// directory holding links to dist/ and examples/ (the daemon writes ./var/lib/mesh/ca there).
import t from 'tap';
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { built } from '../helpers/binary';
import { httpGetIn, netnsUnavailable } from '../helpers/netns';
import { metricValue } from '../helpers/prometheus';
import { runReadmeBlock } from '../helpers/readme-block';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
const skip = netnsUnavailable();

t.test('README: running sidecars without a cluster', { skip }, async (t) => {
  const { ns, dir, out, logOf } = await runReadmeBlock(t, '## Running sidecars without a cluster', 'mesh-nocluster');
  // The files Istio's `x workload entry configure` writes, with the token the daemon's key signed.
  for (const f of ['cluster.env', 'mesh.yaml', 'root-cert.pem', 'mesh-token', 'hosts'])
    t.ok(fs.existsSync(path.join(dir, 'gateway', f)), `gateway/${f} written`);
  const claims = JSON.parse(Buffer.from(fs.readFileSync(path.join(dir, 'gateway/mesh-token'), 'utf8').split('.')[1]!, 'base64url').toString());
  t.equal(claims.sub, 'system:serviceaccount:mesh-system:ingressgateway', "the token names the group's namespace and service account");
  t.same(claims.aud, ['mesh-ca'], "for the CA audience (Istio's istio-ca, renamed)");
  t.equal(claims.exp - claims.iat, 3600, "for --tokenDuration's default, 1 h");
  t.equal(fs.statSync(path.join(dir, 'var/lib/mesh/ca/token-key.pem')).mode & 0o777, 0o600, "the token key is private to the daemon's user");
  t.equal(
    fs.readFileSync(path.join(dir, 'gateway/root-cert.pem'), 'utf8'),
    fs.readFileSync(path.join(dir, 'var/run/secrets/mesh/root-cert.pem'), 'utf8'),
    'root-cert.pem is the root the daemon publishes',
  );

  // The request went through the gateway to the sample.
  const headers = JSON.parse(out(/curl -s http:\/\/127\.0\.0\.1:18080\//).stdout) as { headers: Record<string, string> };
  t.equal(headers.headers['Host'], '127.0.0.1:18080', 'the sample answered through the gateway');
  t.ok(headers.headers['X-Request-Id'], 'the gateway added its request id');
  // Its certificate came from the daemon's CA, for the group's identity.
  const expiry = metricValue(out(/cert_expiry_seconds/).stdout, 'cert_expiry_seconds', 'resource_name="default"');
  t.ok(expiry !== undefined && expiry > 86_000 && expiry <= 86_400, `cert_expiry_seconds ≈ 24 h (${expiry})`);
  const daemonLog = logOf(/pilot-discovery/);
  t.match(daemonLog, /trusting workload tokens signed by .*var\/lib\/mesh\/ca\/token-key\.pem/);
  t.notMatch(daemonLog, /JWT_RULE/, 'no JWT_RULE involved');
  t.notMatch(daemonLog, /Failed to authenticate/, 'no caller was refused');
  const metrics = httpGetIn(ns, 'http://127.0.0.1:15014/metrics').body;
  t.equal(metricValue(metrics, 'ca_server_success_cert_issuance_count'), 1, 'the CA issued one certificate');

  // The operator's certificate, and meshctl over mutual TLS with it.
  const cert = new X509Certificate(fs.readFileSync(path.join(dir, 'certs/cert-chain.pem')));
  t.equal(cert.subjectAltName, 'URI:spiffe://cluster.local/ns/mesh-system/sa/default', "the identity istioctl's debug requests claim");
  t.ok(cert.verify(new X509Certificate(fs.readFileSync(path.join(dir, 'certs/root-cert.pem'))).publicKey), "signed by the daemon's root");
  const status = out(/proxy-status/).stdout;
  t.match(status, /^NAME\s+CLUSTER\s+CDS\s+LDS\s+EDS\s+RDS/m, 'proxy-status answered over :15012');
  t.match(status, /\.mesh-system\s+\S*\s+SYNCED/, 'and lists the gateway, synced');
});
