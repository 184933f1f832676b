// Gateway, DestinationRule, ServiceEntry, WorkloadEntry, WorkloadGroup and Sidecar validation with
// Istio 1.26's rules and messages (pkg/config/validation/validation.go and agent/validation.go).
import t from 'tap';
import { accepts, mk, rejects } from './helpers';

const server = (s: Record<string, unknown>) => ({ port: { number: 80, name: 'http', protocol: 'HTTP' }, hosts: ['*/example.com'], ...s });
const gw = (...servers: Array<Record<string, unknown>>) => mk('Gateway', { selector: { istio: 'ingressgateway' }, servers: servers.map(server) });
const https = (tls: Record<string, unknown>) => gw({ port: { number: 443, name: 'https', protocol: 'HTTPS' }, tls });

t.test('Gateway', async (t) => {
  accepts(t, gw({}), []);
  accepts(t, https({ mode: 'SIMPLE', credentialName: 'cert' }), []);
  accepts(t, https({ mode: 'MUTUAL', serverCertificate: '/c', privateKey: '/k', caCertificates: '/ca' }), []);
  accepts(t, gw({ hosts: ['example.com', '*.example.com', './api.example.com', '10.0.0.1'] }), [], 'bare hosts, wildcards, IPs');
  accepts(t, gw({ tls: { httpsRedirect: true } }), [], 'an HTTP server may carry httpsRedirect');
  rejects(t, mk('Gateway', { servers: [] }), [['spec.servers', 'gateway must have at least one server']]);
  rejects(t, mk('Gateway', { servers: [server({})] }, { name: 'gw.x' }), [['metadata.name', 'invalid gateway name: "gw.x"']]);
  rejects(t, gw({ hosts: [] }), [['spec.servers[0].hosts', 'server config must contain at least one host']]);
  rejects(t, gw({ hosts: ['ns/foo'] }), [['spec.servers[0].hosts[0]', 'short names (non FQDN) are not allowed']]);
  rejects(t, gw({ hosts: ['~/foo.com'] }), [['spec.servers[0].hosts[0]', 'invalid namespace value "~" in gateway']]);
  rejects(t, gw({ hosts: ['ns/foo*.example.com'] }), [
    ['spec.servers[0].hosts[0]', 'domain name "foo*.example.com" invalid (label "foo*" invalid)'],
    ['spec.servers[0].hosts[0]', 'partial wildcard "foo*.example.com" not allowed'],
  ]);
  rejects(t, gw({ port: { number: 80, name: 'http', protocol: 'FOO' } }), [
    ['spec.servers[0].port.protocol', 'invalid protocol "FOO", supported protocols are HTTP, HTTP2, GRPC, GRPC-WEB, MONGO, REDIS, MYSQL, TCP'],
  ]);
  rejects(t, gw({ port: { number: 0, name: 'http', protocol: 'HTTP' } }), [
    ['spec.servers[0].port.number', 'port number 0 must be in the range 1..65535'],
  ]);
  rejects(t, gw({ port: { number: 80, protocol: 'HTTP' } }), [['spec.servers[0].port.name', 'port name must be set: number:80 protocol:"HTTP"']]);
  rejects(t, gw({ port: undefined }), [['spec.servers[0].port', 'port is required']]);
  rejects(t, gw({ port: { number: 80, name: 'http', protocol: 'HTTP', targetPort: 8080 } }), [
    ['spec.servers[0].port.targetPort', 'targetPort has no impact on Gateways'],
  ]);
  rejects(t, gw({ port: { number: 443, name: 'https', protocol: 'HTTPS' } }), [
    ['spec.servers[0].tls', 'server must have TLS settings for HTTPS/TLS protocols'],
  ]);
  rejects(t, gw({ tls: { mode: 'SIMPLE', credentialName: 'c' } }), [
    ['spec.servers[0].tls', 'server cannot have TLS settings for plain text HTTP ports'],
  ]);
  rejects(t, gw({ port: { number: 9000, name: 'tcp', protocol: 'TCP' }, tls: { mode: 'SIMPLE', credentialName: 'c' } }), [
    ['spec.servers[0].tls', 'server cannot have TLS settings for non HTTPS/TLS ports'],
  ]);
  rejects(t, https({ mode: 'SIMPLE' }), [
    ['spec.servers[0].tls.serverCertificate', 'SIMPLE TLS requires a server certificate'],
    ['spec.servers[0].tls.privateKey', 'SIMPLE TLS requires a private key'],
  ]);
  rejects(t, https({ mode: 'MUTUAL', serverCertificate: '/c', privateKey: '/k' }), [
    ['spec.servers[0].tls.caCertificates', 'MUTUAL TLS requires a client CA bundle'],
  ]);
  rejects(t, https({ mode: 'ISTIO_MUTUAL', credentialName: 'c' }), [
    ['spec.servers[0].tls.credentialName', 'ISTIO_MUTUAL TLS cannot have associated credentialName'],
  ]);
  rejects(t, https({ mode: 'SIMPLE', credentialName: 'c', serverCertificate: '/c', privateKey: '/k' }), [
    ['spec.servers[0].tls', 'only one of credential_name, credential_names, server_certificate/private_key, tls_certificates should be specified'],
  ]);
  rejects(t, https({ mode: 'SIMPLE', serverCertificate: '/c', privateKey: '/k', caCrl: '/crl' }), [
    ['spec.servers[0].tls.caCrl', 'CRL is not supported with SIMPLE TLS'],
  ]);
  rejects(t, https({ mode: 'FANCY' }), [
    [
      'spec.servers[0].tls.mode',
      'invalid value "FANCY", must be one of PASSTHROUGH, SIMPLE, MUTUAL, AUTO_PASSTHROUGH, ISTIO_MUTUAL, OPTIONAL_MUTUAL',
    ],
  ]);
  accepts(t, https({ mode: 'PASSTHROUGH', serverCertificate: '/c' }), [
    ['spec.servers[0].tls', 'PASSTHROUGH mode does not use certificates, they will be ignored'],
  ]);
  accepts(t, https({ mode: 'SIMPLE', credentialName: 'c', cipherSuites: ['ECDHE-RSA-AES128-GCM-SHA256', 'NOT-A-CIPHER'] }), [
    ['spec.servers[0].tls.cipherSuites', 'ignoring invalid cipher suites: [NOT-A-CIPHER]'],
  ]);
  rejects(t, gw({}, { port: { number: 81, name: 'http', protocol: 'HTTP' } }), [
    ['spec.servers[1].port.name', 'port names in servers must be unique: duplicate name http'],
  ]);
  rejects(t, gw({ bind: 'foo' }), [['spec.servers[0].bind', 'foo is not a valid IP']]);
  rejects(t, gw({ port: { number: 9000, name: 'tcp', protocol: 'TCP' }, tls: { httpsRedirect: true } }), [
    ['spec.servers[0].tls', 'server cannot have TLS settings for non HTTPS/TLS ports'],
  ]);
});

const dr = (spec: Record<string, unknown>, meta = {}) => mk('DestinationRule', { host: 'reviews.default.svc.cluster.local', ...spec }, meta);

t.test('DestinationRule', async (t) => {
  accepts(
    t,
    dr({
      trafficPolicy: {
        loadBalancer: { simple: 'LEAST_REQUEST' },
        connectionPool: { tcp: { maxConnections: 100, connectTimeout: '30ms' }, http: { http2MaxRequests: 1000, idleTimeout: '1m' } },
        outlierDetection: { consecutive5xxErrors: 7, interval: '5m', baseEjectionTime: '15m', maxEjectionPercent: 50 },
        tls: { mode: 'ISTIO_MUTUAL' },
      },
      subsets: [
        { name: 'v1', labels: { version: 'v1' } },
        {
          name: 'v2',
          labels: { version: 'v2' },
          trafficPolicy: { loadBalancer: { consistentHash: { httpHeaderName: 'x-user', maglev: { tableSize: 65537 } } } },
        },
      ],
    }),
    [],
  );
  rejects(t, dr({ host: '' }), [['spec.host', 'empty domain name not allowed']]);
  rejects(t, dr({ subsets: [{ name: 'v1' }, { name: 'v1' }] }), [['spec.subsets[1].name', 'duplicate subset names: v1']]);
  rejects(t, dr({ subsets: [{ name: 'V_1' }] }), [['spec.subsets[0].name', 'subset name is invalid: V_1']]);
  rejects(t, dr({ subsets: [{ name: 'v1', labels: { 'a b': 'x' } }] }), [['spec.subsets[0].labels[a b]', 'invalid tag key: "a b"']]);
  rejects(t, dr({ trafficPolicy: {} }), [['spec.trafficPolicy', 'traffic policy must have at least one field']]);
  rejects(t, dr({ trafficPolicy: { connectionPool: {} } }), [['spec.trafficPolicy.connectionPool', 'connection pool must have at least one field']]);
  rejects(t, dr({ trafficPolicy: { connectionPool: { tcp: { maxConnections: -1 }, http: { maxRetries: -2 } } } }), [
    ['spec.trafficPolicy.connectionPool.http.maxRetries', 'max retries must be non-negative'],
    ['spec.trafficPolicy.connectionPool.tcp.maxConnections', 'max connections must be non-negative'],
  ]);
  rejects(t, dr({ trafficPolicy: { connectionPool: { tcp: { connectTimeout: '0.1ms' } } } }), [
    ['spec.trafficPolicy.connectionPool.tcp.connectTimeout', 'duration must be greater than 1ms'],
  ]);
  rejects(t, dr({ trafficPolicy: { outlierDetection: { maxEjectionPercent: 150 } } }), [
    ['spec.trafficPolicy.outlierDetection.maxEjectionPercent', 'percentage 150 is not in range 0..100'],
  ]);
  rejects(t, dr({ trafficPolicy: { outlierDetection: { consecutiveLocalOriginFailures: 5 } } }), [
    [
      'spec.trafficPolicy.outlierDetection.consecutiveLocalOriginFailures',
      'outlier detection consecutive local origin failures is specified, but split external local origin errors is set to false',
    ],
  ]);
  rejects(t, dr({ trafficPolicy: { loadBalancer: { simple: 'ROUND_ROBIN', consistentHash: { useSourceIp: true } } } }), [
    ['spec.trafficPolicy.loadBalancer', 'only one of simple, consistentHash may be set, found simple and consistentHash'],
  ]);
  rejects(t, dr({ trafficPolicy: { loadBalancer: { consistentHash: { httpCookie: { ttl: '10s' } } } } }), [
    ['spec.trafficPolicy.loadBalancer.consistentHash.httpCookie.name', 'name required for HttpCookie'],
  ]);
  // validateLoadBalancer's warmup rules (Istio 1.26).
  accepts(t, dr({ trafficPolicy: { loadBalancer: { simple: 'ROUND_ROBIN', warmup: { duration: '60s', minimumPercent: 10, aggression: 1 } } } }), []);
  rejects(t, dr({ trafficPolicy: { loadBalancer: { warmup: { minimumPercent: 10 } } } }), [
    ['spec.trafficPolicy.loadBalancer.warmup.duration', 'duration is required'],
  ]);
  rejects(t, dr({ trafficPolicy: { loadBalancer: { warmup: { duration: '1s', minimumPercent: 101 } } } }), [
    ['spec.trafficPolicy.loadBalancer.warmup.minimumPercent', 'minimumPercent value should be less than or equal to 100'],
  ]);
  rejects(t, dr({ trafficPolicy: { loadBalancer: { warmup: { duration: '1s', aggression: 0.5 } } } }), [
    ['spec.trafficPolicy.loadBalancer.warmup.aggression', 'aggression should be greater than or equal to 1'],
  ]);
  rejects(t, dr({ trafficPolicy: { loadBalancer: { consistentHash: { useSourceIp: true, maglev: { tableSize: 10 } } } } }), [
    ['spec.trafficPolicy.loadBalancer.consistentHash.maglev.tableSize', 'tableSize must be a prime number for maglev'],
  ]);
  rejects(t, dr({ trafficPolicy: { loadBalancer: { simple: 'FASTEST' } } }), [
    [
      'spec.trafficPolicy.loadBalancer.simple',
      'invalid value "FASTEST", must be one of UNSPECIFIED, LEAST_CONN, RANDOM, PASSTHROUGH, ROUND_ROBIN, LEAST_REQUEST',
    ],
  ]);
  rejects(
    t,
    dr({
      trafficPolicy: {
        loadBalancer: { localityLbSetting: { distribute: [{ from: 'us-west/*', to: { 'us-west/zone1': 50, 'us-west/zone2': 40 } }] } },
      },
    }),
    [['spec.trafficPolicy.loadBalancer.localityLbSetting.distribute[0].to', 'total locality weight 90 != 100']],
  );
  rejects(t, dr({ trafficPolicy: { tls: { mode: 'MUTUAL' } } }), [
    ['spec.trafficPolicy.tls.clientCertificate', 'client certificate required for mutual tls'],
    ['spec.trafficPolicy.tls.privateKey', 'private key required for mutual tls'],
  ]);
  rejects(t, dr({ trafficPolicy: { tls: { mode: 'SIMPLE', credentialName: 'c', caCertificates: '/ca' } } }), [
    ['spec.trafficPolicy.tls.credentialName', 'cannot specify client certificates or CA certificate or CA CRL If credentialName is set'],
  ]);
  rejects(t, dr({ trafficPolicy: { tls: { mode: 'SIMPLE', insecureSkipVerify: true, subjectAltNames: ['a'] } } }), [
    [
      'spec.trafficPolicy.tls.insecureSkipVerify',
      'cannot specify CaCertificates or CredentialName or SubjectAltNames when InsecureSkipVerify is set true',
    ],
  ]);
  rejects(t, dr({ trafficPolicy: { portLevelSettings: [{ loadBalancer: { simple: 'RANDOM' } }, { port: { number: 80 } }] } }), [
    ['spec.trafficPolicy.portLevelSettings[0].port', 'portTrafficPolicy must have valid port'],
    ['spec.trafficPolicy.portLevelSettings[1]', 'port traffic policy must have at least one field'],
  ]);
  rejects(t, dr({ workloadSelector: { matchLabels: { app: 'a' } }, exportTo: ['ns2'] }), [
    ['spec.exportTo', 'destination rule with workload selector cannot have exportTo beyond current namespace'],
  ]);
  accepts(t, dr({ workloadSelector: { matchLabels: {} } }), [['spec.workloadSelector.matchLabels', 'workload selector specified without labels']]);
  accepts(t, dr({ trafficPolicy: { outlierDetection: { consecutiveErrors: 5 } } }), [
    [
      'spec.trafficPolicy.outlierDetection.consecutiveErrors',
      'outlier detection consecutive errors is deprecated, use consecutiveGatewayErrors or consecutive5xxErrors instead',
    ],
  ]);
});

const se = (spec: Record<string, unknown>) => mk('ServiceEntry', spec);
const TCP_WARN = 'addresses are required for ports serving TCP (or unset) protocol when MESH_META_DNS_AUTO_ALLOCATE is not set on a proxy';

t.test('ServiceEntry', async (t) => {
  accepts(
    t,
    se({ hosts: ['api.example.com'], ports: [{ number: 443, name: 'https', protocol: 'TLS' }], resolution: 'DNS', location: 'MESH_EXTERNAL' }),
    [],
  );
  accepts(
    t,
    se({
      hosts: ['ratings.mesh'],
      ports: [{ number: 9080, name: 'http', protocol: 'HTTP' }],
      resolution: 'STATIC',
      endpoints: [{ address: '10.0.0.1', ports: { http: 8080 } }],
    }),
    [],
  );
  accepts(
    t,
    se({ hosts: ['*.example.com'], addresses: ['10.1.0.0/16'], ports: [{ number: 80, name: 'http', protocol: 'HTTP' }] }),
    [],
    'NONE with a CIDR',
  );
  accepts(t, se({ hosts: ['db.example.com'], ports: [{ number: 5432, name: 'tcp', protocol: 'TCP' }], resolution: 'DNS' }), [
    ['spec.ports[0]', TCP_WARN],
  ]);
  rejects(t, se({ hosts: [] }), [['spec.hosts', 'service entry must have at least one host']]);
  rejects(t, se({ hosts: ['*'] }), [['spec.hosts[0]', 'invalid host *']]);
  rejects(t, se({ hosts: ['*.example.com'], resolution: 'DNS', ports: [{ number: 80, name: 'http', protocol: 'HTTP' }] }), [
    ['spec.hosts[0]', 'hosts must be FQDN if no endpoints are provided for resolution mode DNS'],
  ]);
  rejects(t, se({ hosts: ['a.com'], resolution: 'NONE', endpoints: [{ address: '1.1.1.1' }] }), [
    ['spec.endpoints', 'no endpoints should be provided for resolution type none'],
  ]);
  rejects(t, se({ hosts: ['a.com'], resolution: 'STATIC', endpoints: [{ address: 'foo.com' }] }), [
    ['spec.endpoints[0].address', 'endpoint address "foo.com" is not a valid IP address'],
  ]);
  rejects(
    t,
    se({
      hosts: ['a.com'],
      resolution: 'STATIC',
      ports: [{ number: 80, name: 'http', protocol: 'HTTP' }],
      endpoints: [{ address: '1.1.1.1', ports: { grpc: 8080 } }],
    }),
    [['spec.endpoints[0].ports[grpc]', 'endpoint port 8080 is not defined by the service entry']],
  );
  rejects(t, se({ hosts: ['a.com'], resolution: 'STATIC', workloadSelector: { labels: { app: 'a' } }, endpoints: [{ address: '1.1.1.1' }] }), [
    ['spec', 'only one of WorkloadSelector or Endpoints is allowed in Service Entry'],
  ]);
  rejects(
    t,
    se({
      hosts: ['a.com'],
      ports: [
        { number: 80, name: 'http', protocol: 'HTTP' },
        { number: 80, name: 'http', protocol: 'HTTP' },
      ],
    }),
    [
      ['spec.ports[1].name', 'service entry port name "http" already defined'],
      ['spec.ports[1].number', 'service entry port 80 already defined'],
    ],
  );
  rejects(t, se({ hosts: ['a.com'], addresses: ['10.0.0.0/8'], resolution: 'DNS', ports: [{ number: 80, name: 'http', protocol: 'HTTP' }] }), [
    ['spec.addresses', 'CIDR addresses are allowed only for NONE/STATIC resolution types'],
  ]);
  rejects(t, se({ hosts: ['a.com'], addresses: ['1.2.3.4/33'], ports: [{ number: 80, name: 'http', protocol: 'HTTP' }] }), [
    ['spec.addresses[0]', '1.2.3.4/33 is not a valid CIDR block'],
  ]);
  rejects(
    t,
    se({ hosts: ['a.com', 'b.com'], resolution: 'DNS', addresses: ['240.0.0.1'], ports: [{ number: 3306, name: 'mysql', protocol: 'MySQL' }] }),
    [['spec.ports[0]', 'multiple hosts provided with non-HTTP, non-TLS ports']],
  );
  rejects(
    t,
    se({
      hosts: ['a.com'],
      resolution: 'DNS_ROUND_ROBIN',
      ports: [{ number: 80, name: 'http', protocol: 'HTTP' }],
      endpoints: [{ address: 'a1.com' }, { address: 'a2.com' }],
    }),
    [['spec.endpoints', 'there must only be 0 or 1 endpoint for resolution mode DNS_ROUND_ROBIN']],
  );
  rejects(t, se({ hosts: ['a.com'], ports: [{ number: 80, name: 'http', protocol: 'FOO' }] }), [
    ['spec.ports[0].protocol', 'unsupported protocol: FOO'],
  ]);
  rejects(t, se({ hosts: ['a.com'], resolution: 'MAGIC' }), [
    ['spec.resolution', 'invalid value "MAGIC", must be one of NONE, STATIC, DNS, DNS_ROUND_ROBIN'],
  ]);
  rejects(t, se({ hosts: ['a.com'], workloadSelector: { labels: { app: '*' } }, ports: [{ number: 80, name: 'http', protocol: 'HTTP' }] }), [
    ['spec.workloadSelector.labels[app]', 'wildcard is not supported in selector: "app=*"'],
  ]);
});

t.test('WorkloadEntry and WorkloadGroup', async (t) => {
  accepts(t, mk('WorkloadEntry', { address: '10.0.0.5', ports: { http: 8080 }, labels: { app: 'ratings' }, serviceAccount: 'ratings' }), []);
  accepts(t, mk('WorkloadEntry', { address: 'vm1.example.com' }), [], 'an FQDN address');
  rejects(t, mk('WorkloadEntry', {}), [['spec.address', 'address is required']]);
  accepts(t, mk('WorkloadEntry', { network: 'n1' }), [['spec.address', 'address is unset with network "n1"']]);
  rejects(t, mk('WorkloadEntry', { address: 'bad_addr' }), [['spec.address', 'endpoint address "bad_addr" is not a valid FQDN or an IP address']]);
  rejects(t, mk('WorkloadEntry', { address: '10.0.0.5', ports: { HTTP_1: 0 } }), [
    ['spec.ports[HTTP_1]', 'invalid port name: HTTP_1'],
    ['spec.ports[HTTP_1]', 'port number 0 must be in the range 1..65535'],
  ]);
  rejects(t, mk('WorkloadEntry', { address: 'unix:///sock', ports: { http: 80 } }), [
    ['spec.ports', 'unix endpoint unix:///sock must not include ports'],
  ]);
  accepts(
    t,
    mk('WorkloadGroup', {
      metadata: { labels: { app: 'a' } },
      template: { serviceAccount: 'a' },
      probe: { httpGet: { port: 8080, path: '/ready' } },
    }),
    [],
  );
  rejects(t, mk('WorkloadGroup', {}), [['spec.template', 'template is required']]);
  rejects(t, mk('WorkloadGroup', { template: {}, probe: { periodSeconds: -1, exec: { command: [] } } }), [
    ['spec.probe.periodSeconds', 'periodSeconds must be non-negative'],
    ['spec.probe.exec.command', 'exec.command is required'],
  ]);
  rejects(t, mk('WorkloadGroup', { template: {}, probe: { httpGet: { port: 0, scheme: 'FTP' } } }), [
    ['spec.probe.httpGet.port', 'port number 0 must be in the range 1..65535'],
    ['spec.probe.httpGet.scheme', 'httpGet.scheme must be one of "HTTPS", "HTTP"'],
  ]);
});

const sc = (spec: Record<string, unknown>) => mk('Sidecar', spec, { namespace: 'prod' });

t.test('Sidecar', async (t) => {
  accepts(t, sc({ egress: [{ hosts: ['./*', 'istio-system/*'] }] }), []);
  accepts(
    t,
    sc({
      ingress: [{ port: { number: 9080, protocol: 'HTTP', name: 'http' }, defaultEndpoint: '127.0.0.1:8080' }],
      egress: [{ port: { number: 3306, protocol: 'MYSQL', name: 'mysql' }, hosts: ['*/mysql.example.com'] }, { hosts: ['*/*'] }],
    }),
    [],
  );
  rejects(t, sc({}), [['spec', 'sidecar: empty configuration provided']]);
  rejects(t, sc({ egress: [{ hosts: ['foo.com'] }] }), [['spec.egress[0].hosts[0]', 'host must be of form namespace/dnsName']]);
  rejects(t, sc({ egress: [{ hosts: ['ns/foo'] }] }), [['spec.egress[0].hosts[0]', 'short names (non FQDN) are not allowed']]);
  rejects(t, sc({ egress: [{ hosts: ['Bad_NS/*'] }] }), [['spec.egress[0].hosts[0]', 'invalid namespace value "Bad_NS" in sidecar']]);
  rejects(t, sc({ egress: [{ hosts: [] }] }), [['spec.egress[0].hosts', 'sidecar: egress listener must contain at least one host']]);
  rejects(t, sc({ egress: [{ hosts: ['*/*'] }, { port: { number: 80, protocol: 'HTTP', name: 'http' }, hosts: ['*/*'] }] }), [
    ['spec.egress[0].port', 'sidecar: the egress listener with empty port should be the last listener in the list'],
  ]);
  rejects(
    t,
    sc({
      egress: [
        { port: { number: 80, protocol: 'HTTP' }, hosts: ['*/*'] },
        { port: { number: 80, protocol: 'HTTP' }, hosts: ['*/*'] },
      ],
    }),
    [['spec.egress[1].port.number', 'sidecar: ports on IP bound listeners must be unique']],
  );
  accepts(t, sc({ egress: [{ hosts: ['ns1/*', 'ns1/foo.com'] }] }), [['spec.egress[0].hosts[1]', 'duplicated egress host: ns1/foo.com']]);
  accepts(t, sc({ egress: [{ hosts: ['*/*', 'ns1/foo.com'] }] }), [
    ['spec.egress[0].hosts', '`*/*` host select all resources, no other hosts can be added'],
  ]);
  rejects(t, sc({ ingress: [{ defaultEndpoint: '127.0.0.1:8080' }] }), [['spec.ingress[0].port', 'sidecar: port is required for ingress listeners']]);
  rejects(t, sc({ ingress: [{ port: { number: 9080, protocol: 'HTTP' }, defaultEndpoint: '10.1.1.1:8080' }] }), [
    [
      'spec.ingress[0].defaultEndpoint',
      'sidecar: defaultEndpoint must be of form 127.0.0.1:<port>,0.0.0.0:<port>,[::1]:port,[::]:port,unix://filepath or unset',
    ],
  ]);
  rejects(t, sc({ ingress: [{ port: { number: 9080, protocol: 'HTTP' }, tls: { mode: 'ISTIO_MUTUAL' } }] }), [
    ['spec.ingress[0].tls.mode', 'configuration is invalid: cannot set mode to ISTIO_MUTUAL in sidecar ingress tls'],
  ]);
  rejects(t, sc({ outboundTrafficPolicy: { mode: 'REGISTRY_ONLY', egressProxy: { host: 'proxy.example.com', port: { number: 3128 } } } }), [
    ['spec.outboundTrafficPolicy.egressProxy', 'sidecar: egress_proxy must be set only with ALLOW_ANY outbound_traffic_policy mode'],
  ]);
  accepts(t, sc({ workloadSelector: { labels: {} }, egress: [{ hosts: ['./*'] }] }), [
    ['spec.workloadSelector', 'sidecar: workload selector specified without labels, will be applied to all services in namespace'],
  ]);
  accepts(
    t,
    sc({ workloadSelector: { matchLabels: { app: 'a' } }, egress: [{ hosts: ['./*'] }] }),
    [
      ['spec.workloadSelector.matchLabels', 'unknown field "matchLabels"'],
      ['spec.workloadSelector', 'sidecar: workload selector specified without labels, will be applied to all services in namespace'],
    ],
    'Sidecar selectors use `labels`',
  );
});
