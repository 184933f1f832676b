// Pure pieces of mesh mTLS against Envoy's and Istio's behaviour: Istio 1.26's inbound filter chains
// (PERMISSIVE and STRICT, by destination port, transport protocol and ALPN), listener-filter
// filter_disabled predicates, transport socket matching on endpoint/locality metadata, the
// x-forwarded-client-cert header, RFC 2253 subjects and RBAC's authenticated principal.
import t from 'tap';
import type { JsonObject } from '@bufbuild/protobuf';
import { FilterChainMatchSchema, ListenerFilterChainMatchPredicateSchema } from '../../src/gen/envoy/config/listener/v3/listener_components_pb';
import { RBACSchema } from '../../src/gen/envoy/config/rbac/v3/rbac_pb';
import { compileChainMatch, compileFilterDisabled, selectChain, type ConnectionFacts } from '../../src/proxy/listener/chain-match';
import { RequestHeaders } from '../../src/proxy/codec/headers';
import { clientCertDetailsOf, xfccAction, type ClientCertDetail, type ForwardClientCert } from '../../src/proxy/http/xfcc';
import { urlEncodePem } from '../../src/proxy/tls/pem';
import { RbacEngine } from '../../src/proxy/rbac/engine';
import type { DownstreamConnectionInfo } from '../../src/proxy/stream-info';
import { rfc2253 } from '../../src/proxy/tls/context';
import { metadataLabelMatch } from '../../src/proxy/upstream/transport-socket';
import { pb } from './helpers';
import { plainConnection } from '../helpers/connection';

// Istio's ALPN values (pilot/pkg/networking/core/listener_inbound.go, pilot/pkg/xds/filters/filters.go)
const MTLS_HTTP = ['istio-http/1.0', 'istio-http/1.1', 'istio-h2'];
const PLAIN_HTTP = ['http/1.0', 'http/1.1', 'h2c'];
const MTLS_TCP = ['istio-peer-exchange', 'istio'];

t.test("Istio's inbound filter chains pick by port, transport protocol and ALPN", async (t) => {
  const chain = (name: string, m: JsonObject) => ({ name, match: compileChainMatch(pb(FilterChainMatchSchema, m), name) });
  // virtualInbound of a pod with an HTTP port 9080 (PERMISSIVE), a TCP port 9000 (PERMISSIVE) and a STRICT TCP port 7000
  const chains = [
    chain('blackhole-15006', { destination_port: 15006 }),
    chain('9080-mtls-http', { destination_port: 9080, transport_protocol: 'tls', application_protocols: MTLS_HTTP }),
    chain('9080-plain-http', { destination_port: 9080, transport_protocol: 'raw_buffer', application_protocols: PLAIN_HTTP }),
    chain('9080-mtls-tcp', { destination_port: 9080, transport_protocol: 'tls', application_protocols: MTLS_TCP }),
    chain('9080-plain-tcp', { destination_port: 9080, transport_protocol: 'raw_buffer' }),
    chain('9080-tls-tcp', { destination_port: 9080, transport_protocol: 'tls' }),
    chain('9000-mtls-tcp', { destination_port: 9000, transport_protocol: 'tls', application_protocols: MTLS_TCP }),
    chain('9000-plain-tcp', { destination_port: 9000, transport_protocol: 'raw_buffer' }),
    chain('9000-tls-tcp', { destination_port: 9000, transport_protocol: 'tls' }),
    chain('7000-strict', { destination_port: 7000, transport_protocol: 'tls' }),
    chain('passthrough-tcp', { prefix_ranges: [{ address_prefix: '0.0.0.0', prefix_len: 0 }] }),
    chain('passthrough-http', { prefix_ranges: [{ address_prefix: '0.0.0.0', prefix_len: 0 }], application_protocols: ['http/1.1', 'h2c'] }),
  ];
  const facts = (o: Partial<ConnectionFacts>): ConnectionFacts => ({
    destinationPort: 9080,
    destinationIp: '10.1.0.7',
    serverName: '',
    transportProtocol: 'raw_buffer',
    applicationProtocols: [],
    sourceIp: '10.1.0.5',
    sourcePort: 40000,
    ...o,
  });
  const rows: Array<[string, Partial<ConnectionFacts>, string | undefined]> = [
    [
      'sidecar HTTP/1.1 over mTLS (istio.alpn override)',
      { transportProtocol: 'tls', applicationProtocols: ['istio-http/1.1', 'istio', 'http/1.1'] },
      '9080-mtls-http',
    ],
    ['sidecar HTTP/2 over mTLS', { transportProtocol: 'tls', applicationProtocols: ['istio-h2', 'istio', 'h2'] }, '9080-mtls-http'],
    ['sidecar TCP over mTLS (cluster ALPN)', { transportProtocol: 'tls', applicationProtocols: ['istio-peer-exchange', 'istio'] }, '9080-mtls-tcp'],
    ['plaintext HTTP from a pod without sidecar', { applicationProtocols: ['http/1.1'] }, '9080-plain-http'],
    ['plaintext h2c', { applicationProtocols: ['h2c'] }, '9080-plain-http'],
    ['plaintext opaque bytes', {}, '9080-plain-tcp'],
    ['one-way TLS from an app (no istio ALPN)', { transportProtocol: 'tls', applicationProtocols: ['h2', 'http/1.1'] }, '9080-tls-tcp'],
    ['TCP port, mesh mTLS', { destinationPort: 9000, transportProtocol: 'tls', applicationProtocols: MTLS_TCP }, '9000-mtls-tcp'],
    ['TCP port, plaintext', { destinationPort: 9000 }, '9000-plain-tcp'],
    ['STRICT port, mTLS', { destinationPort: 7000, transportProtocol: 'tls', applicationProtocols: MTLS_TCP }, '7000-strict'],
    ['STRICT port refuses plaintext (no chain for raw_buffer on the port)', { destinationPort: 7000 }, undefined],
    ['direct connection to 15006', { destinationPort: 15006 }, 'blackhole-15006'],
    ['unknown port: HTTP passthrough', { destinationPort: 8888, applicationProtocols: ['http/1.1'] }, 'passthrough-http'],
    ['unknown port: TCP passthrough', { destinationPort: 8888 }, 'passthrough-tcp'],
  ];
  for (const [why, o, want] of rows) t.equal(selectChain(chains, facts(o))?.name, want, why);
});

t.test('listener filter_disabled predicates (Istio listenerPredicateExcludePorts / IncludePorts)', async (t) => {
  const pred = (j: JsonObject) => compileFilterDisabled(pb(ListenerFilterChainMatchPredicateSchema, j), 'f');
  const exclude = pred({
    or_match: { rules: [{ destination_port_range: { start: 9000, end: 9001 } }, { destination_port_range: { start: 15006, end: 15007 } }] },
  });
  t.equal(exclude(9000), true, 'range start is included');
  t.equal(exclude(9001), false, 'range end is excluded');
  t.equal(exclude(15006), true);
  t.equal(exclude(9080), false);
  const include = pred({ not_match: { destination_port_range: { start: 9080, end: 9081 } } });
  t.equal(include(9080), false, 'not_match: enabled only on the listed port');
  t.equal(include(9000), true);
  t.equal(pred({ any_match: true })(1), true);
  t.equal(
    pred({
      and_match: { rules: [{ destination_port_range: { start: 1, end: 100 } }, { not_match: { destination_port_range: { start: 50, end: 51 } } }] },
    })(50),
    false,
  );
  t.equal(compileFilterDisabled(undefined, 'f')(9080), false, 'no predicate: the filter always runs');
  t.throws(() => pred({}), /a rule is required/);
});

t.test('transport socket matches on envoy.transport_socket_match metadata (Envoy metadataLabelMatch)', async (t) => {
  const md = (v: JsonObject | undefined): JsonObject | undefined =>
    v ? { 'envoy.transport_socket_match': v, istio: { workload: 'b;default;b;v1;Orchestrator' } } : undefined;
  t.equal(metadataLabelMatch({ tlsMode: 'istio' }, md({ tlsMode: 'istio' }), 'envoy.transport_socket_match'), true, "Istio's tlsMode-istio match");
  t.equal(metadataLabelMatch({ tlsMode: 'istio' }, md({ tlsMode: 'disabled' }), 'envoy.transport_socket_match'), false);
  t.equal(metadataLabelMatch({ tlsMode: 'istio' }, undefined, 'envoy.transport_socket_match'), false, 'no metadata, a non-empty match fails');
  t.equal(
    metadataLabelMatch({}, undefined, 'envoy.transport_socket_match'),
    true,
    "an empty match (Istio's tlsMode-disabled) matches every endpoint",
  );
  t.equal(metadataLabelMatch({}, md({ tlsMode: 'istio' }), 'envoy.transport_socket_match'), true);
  t.equal(metadataLabelMatch({ a: '1', b: '2' }, md({ a: '1' }), 'envoy.transport_socket_match'), false, 'every label must be present');
  t.equal(metadataLabelMatch({ n: 1 }, md({ n: '1' }), 'envoy.transport_socket_match'), false, 'values compare with their types');
  t.equal(metadataLabelMatch({ l: ['x'] }, md({ l: ['x'] }), 'envoy.transport_socket_match'), true, 'lists compare by value');
});

function conn(o: Partial<DownstreamConnectionInfo> = {}): DownstreamConnectionInfo {
  return plainConnection({ remoteAddress: '10.1.0.5', remotePort: 40000, localAddress: '10.1.0.7', localPort: 9080, ...o });
}

t.test('x-forwarded-client-cert (Envoy mutateXfccRequestHeader)', async (t) => {
  const ssl = {
    sha256PeerCertificateDigest: 'a9b8c7',
    uriSanLocalCertificate: ['spiffe://cluster.local/ns/b/sa/b'],
    urlEncodedPemEncodedPeerCertificate: () => '-----BEGIN%20CERTIFICATE-----%0AMII%2B%2F%3D%0A-----END%20CERTIFICATE-----%0A',
    urlEncodedPemEncodedPeerCertificateChain: () => '',
  };
  const mtls = conn({
    tls: true,
    peerCertificatePresented: true,
    peerUriSans: ['spiffe://cluster.local/ns/a/sa/a', 'spiffe://second'],
    peerDnsSans: ['a.example', 'b.example'],
    peerSubject: 'CN=client,O=Acme',
    ssl,
  });
  const istioInbound = clientCertDetailsOf({ subject: true, dns: true, uri: true } as never);
  t.same(istioInbound, ['Subject', 'URI', 'DNS'], "Envoy's fixed order: Cert, Chain, Subject, URI, DNS");
  const rows: Array<[string, ForwardClientCert, readonly ClientCertDetail[], DownstreamConnectionInfo, unknown]> = [
    [
      'sidecar inbound (Istio: APPEND_FORWARD, Subject/URI/DNS)',
      'APPEND_FORWARD',
      istioInbound,
      mtls,
      {
        kind: 'append',
        value:
          'By=spiffe://cluster.local/ns/b/sa/b;Hash=a9b8c7;Subject="CN=client,O=Acme";URI=spiffe://cluster.local/ns/a/sa/a;DNS=a.example;DNS=b.example',
      },
    ],
    [
      'gateway (SANITIZE_SET, Cert too)',
      'SANITIZE_SET',
      clientCertDetailsOf({ subject: true, cert: true, dns: true, uri: true } as never),
      mtls,
      {
        kind: 'set',
        value:
          'By=spiffe://cluster.local/ns/b/sa/b;Hash=a9b8c7;Cert="-----BEGIN%20CERTIFICATE-----%0AMII%2B%2F%3D%0A-----END%20CERTIFICATE-----%0A";Subject="CN=client,O=Acme";URI=spiffe://cluster.local/ns/a/sa/a;DNS=a.example;DNS=b.example',
      },
    ],
    [
      'empty subject keeps its key; empty URI keeps its key',
      'SANITIZE_SET',
      ['Subject', 'URI'],
      conn({ tls: true, peerCertificatePresented: true, ssl }),
      { kind: 'set', value: 'By=spiffe://cluster.local/ns/b/sa/b;Hash=a9b8c7;Subject="";URI=' },
    ],
    ['no details: By and Hash only', 'SANITIZE_SET', [], mtls, { kind: 'set', value: 'By=spiffe://cluster.local/ns/b/sa/b;Hash=a9b8c7' }],
    ['SANITIZE drops the header on mTLS too', 'SANITIZE', istioInbound, mtls, { kind: 'remove' }],
    ['plaintext: the header is dropped', 'APPEND_FORWARD', istioInbound, conn(), { kind: 'remove' }],
    ['TLS without a client certificate: dropped', 'FORWARD_ONLY', istioInbound, conn({ tls: true }), { kind: 'remove' }],
    ['FORWARD_ONLY on mTLS keeps it unchanged', 'FORWARD_ONLY', istioInbound, mtls, { kind: 'keep' }],
    ['ALWAYS_FORWARD_ONLY keeps it even on plaintext', 'ALWAYS_FORWARD_ONLY', istioInbound, conn(), { kind: 'keep' }],
  ];
  for (const [why, mode, details, c, want] of rows) t.same(xfccAction(mode, details, c), want, why);
  t.equal(
    urlEncodePem('-----BEGIN CERTIFICATE-----\nab+/=\n'),
    '-----BEGIN%20CERTIFICATE-----%0Aab%2B%2F%3D%0A',
    'PEM URL encoding keeps dashes and alphanumerics',
  );
});

t.test('RFC 2253 subjects from Node multi-line subjects (OpenSSL XN_FLAG_RFC2253 order)', async (t) => {
  t.equal(rfc2253('C=US\nST=CA\nO=Acme\nCN=client'), 'CN=client,O=Acme,ST=CA,C=US', 'last RDN first');
  t.equal(rfc2253('O=cluster.local'), 'O=cluster.local');
  t.equal(rfc2253('O=a\\, b\nCN=x + UID=7'), 'CN=x+UID=7,O=a\\, b', 'escaped commas stay, multi-valued RDNs join with +');
  t.equal(rfc2253(''), '', 'Istio workload certificates have an empty subject');
  t.equal(rfc2253(undefined), '');
});

t.test("RBAC authenticated principals (Envoy AuthenticatedMatcher, Istio's source.principals)", async (t) => {
  const engine = new RbacEngine(
    pb(RBACSchema, {
      action: 'ALLOW',
      policies: {
        'ns[b]-policy[allow-a]-rule[0]': {
          permissions: [{ and_rules: { rules: [{ any: true }] } }],
          principals: [
            { and_ids: { ids: [{ or_ids: { ids: [{ authenticated: { principal_name: { exact: 'spiffe://cluster.local/ns/a/sa/a' } } }] } }] } },
          ],
        },
        'ns[b]-policy[ns-c]-rule[0]': {
          permissions: [{ and_rules: { rules: [{ any: true }] } }],
          principals: [{ and_ids: { ids: [{ or_ids: { ids: [{ authenticated: { principal_name: { safe_regex: { regex: '.*/ns/c/.*' } } } }] } }] } }],
        },
      },
    }),
    'rbac',
  );
  const input = (c: Partial<DownstreamConnectionInfo>) => ({
    headers: new RequestHeaders('GET', '/', 'b', 'http', {}),
    path: '/',
    connection: conn(c),
    dynamicMetadata: undefined,
  });
  t.equal(
    engine.evaluate(input({ tls: true, peerCertificatePresented: true, peerUriSans: ['spiffe://cluster.local/ns/a/sa/a'] })).allowed,
    true,
    "A's principal",
  );
  t.equal(
    engine.evaluate(input({ tls: true, peerCertificatePresented: true, peerUriSans: ['spiffe://cluster.local/ns/c/sa/c'] })).policy,
    'ns[b]-policy[ns-c]-rule[0]',
    'source.namespaces as a regex on the principal',
  );
  t.equal(
    engine.evaluate(input({ tls: true, peerCertificatePresented: true, peerUriSans: ['spiffe://cluster.local/ns/d/sa/d'] })).allowed,
    false,
    'another identity is denied',
  );
  t.equal(engine.evaluate(input({ peerUriSans: ['spiffe://cluster.local/ns/a/sa/a'] })).allowed, false, 'not TLS: never authenticated');
  const anyTls = new RbacEngine(
    pb(RBACSchema, { action: 'ALLOW', policies: { p: { permissions: [{ any: true }], principals: [{ authenticated: {} }] } } }),
    'rbac',
  );
  t.equal(anyTls.evaluate(input({ tls: true })).allowed, true, 'an empty principal_name matches any TLS connection');
  t.equal(anyTls.evaluate(input({})).allowed, false);
  const subj = new RbacEngine(
    pb(RBACSchema, {
      action: 'ALLOW',
      policies: { p: { permissions: [{ any: true }], principals: [{ authenticated: { principal_name: { exact: 'CN=client,O=Acme' } } }] } },
    }),
    'rbac',
  );
  t.equal(
    subj.evaluate(input({ tls: true, peerCertificatePresented: true, peerUriSans: ['spiffe://x'], peerSubject: 'CN=client,O=Acme' })).allowed,
    true,
    'the subject is tried after the SANs',
  );
});
