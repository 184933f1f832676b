// ProxyConfig assembly with Istio's precedence (pilot-agent config.ConstructProxyConfig / mesh.ApplyMeshConfig):
// built-in defaults < mesh config file defaultConfig < PROXY_CONFIG, field replacement, proxyMetadata merged,
// clear errors naming the source and field, and the proxy log level split of pkg/envoy.
import t from 'tap';
import { checkProxyLogLevels, constructProxyConfig, splitProxyLogLevel, type ProxyConfigInputs } from '../../src/agent/config';

const base = (over: Partial<ProxyConfigInputs> = {}): ProxyConfigInputs => ({
  serviceCluster: 'mesh-proxy',
  concurrency: 0,
  nodeType: 'sidecar',
  ...over,
});

t.test('defaults are Istio DefaultProxyConfig under mesh names', async (t) => {
  const { proxyConfig: pc, warnings } = constructProxyConfig(base());
  t.same(warnings, []);
  t.equal(pc.discoveryAddress, 'meshd.mesh-system.svc:15012');
  t.equal(pc.drainDuration, 45_000, 'drainDuration 45s');
  t.equal(pc.terminationDrainDuration, 5_000, 'terminationDrainDuration 5s');
  t.equal(pc.parentShutdownDuration, 60_000);
  t.equal(pc.statusPort, 15020);
  t.equal(pc.proxyAdminPort, 15000);
  t.equal(pc.binaryPath, '/usr/local/bin/envoy');
  t.equal(pc.configPath, './etc/mesh/proxy');
  t.equal(pc.controlPlaneAuthPolicy, 'MUTUAL_TLS');
  t.equal(pc.statNameLength, 189);
  t.equal(pc.concurrency, 2, 'sidecars default to 2 workers');
  t.equal(pc.serviceCluster, 'mesh-proxy', '--serviceCluster fills an unset serviceCluster');
  t.equal(constructProxyConfig(base({ nodeType: 'router' })).proxyConfig.concurrency, undefined, 'gateways leave concurrency unset');
});

t.test('file defaultConfig overrides defaults, PROXY_CONFIG overrides the file', async (t) => {
  const meshConfig = {
    path: '/etc/mesh/config/mesh',
    text: `
defaultConfig:
  discoveryAddress: 127.0.0.1:15010
  drainDuration: 20s
  statusPort: 16020
  proxyMetadata:
    A: file
    B: file
  extraStatTags: [one, two]
enableTracing: false
`,
  };
  const { proxyConfig: pc } = constructProxyConfig(
    base({
      meshConfig,
      proxyConfigEnv:
        '{"statusPort": 17020, "proxyMetadata": {"B": "env", "C": "env"}, "extraStatTags": ["three"], "terminationDrainDuration": "0.5s"}',
    }),
  );
  t.equal(pc.discoveryAddress, '127.0.0.1:15010', 'from the file');
  t.equal(pc.drainDuration, 20_000, 'from the file');
  t.equal(pc.statusPort, 17020, 'PROXY_CONFIG wins over the file');
  t.same(pc.proxyMetadata, { A: 'file', B: 'env', C: 'env' }, 'proxyMetadata keys are merged, later layers win');
  t.same(pc.extraStatTags, ['three'], 'lists are replaced, not appended');
  t.equal(pc.terminationDrainDuration, 500);
  t.equal(pc.proxyAdminPort, 15000, 'untouched fields keep their defaults');
});

t.test('PROXY_CONFIG as YAML, proto (snake_case) names and enum numbers', async (t) => {
  const { proxyConfig: pc } = constructProxyConfig(
    base({
      proxyConfigEnv:
        'discovery_address: meshd:15010\ncontrolPlaneAuthPolicy: NONE\nconcurrency: 4\nproxy_stats_matcher:\n  inclusion_prefixes: [upstream]\n',
    }),
  );
  t.equal(pc.discoveryAddress, 'meshd:15010');
  t.equal(pc.controlPlaneAuthPolicy, 'NONE');
  t.equal(pc.concurrency, 4);
  t.same(pc.proxyStatsMatcher, { inclusionPrefixes: ['upstream'] });
  t.equal(constructProxyConfig(base({ proxyConfigEnv: '{"controlPlaneAuthPolicy": 0}' })).proxyConfig.controlPlaneAuthPolicy, 'NONE');
});

t.test('flags: --concurrency wins; a gateway sizes itself from MESH_CPU_LIMIT', async (t) => {
  t.equal(constructProxyConfig(base({ concurrency: 3, proxyConfigEnv: 'concurrency: 8' })).proxyConfig.concurrency, 3);
  t.equal(constructProxyConfig(base({ nodeType: 'router', cpuLimit: 3 })).proxyConfig.concurrency, 3);
  t.equal(
    constructProxyConfig(base({ nodeType: 'router', cpuLimit: 3, proxyConfigEnv: 'concurrency: 1' })).proxyConfig.concurrency,
    1,
    'configured concurrency beats the CPU limit',
  );
  t.equal(
    constructProxyConfig(base({ serviceCluster: 'flagged', proxyConfigEnv: 'serviceCluster: configured' })).proxyConfig.serviceCluster,
    'configured',
  );
});

t.test('errors name the source and the field', async (t) => {
  const file = (text: string) => ({ path: 'mesh.yaml', text });
  t.throws(() => constructProxyConfig(base({ meshConfig: file('defaultConfig:\n  statusPort: 70000\n') })), {
    message: 'failed to unmarshal mesh config from file [mesh.yaml]: defaultConfig.statusPort: port number 70000 must be in the range 1..65535',
  });
  t.throws(() => constructProxyConfig(base({ meshConfig: file('defaultConfig:\n  drainDuration: soon\n') })), {
    message:
      /^failed to unmarshal mesh config from file \[mesh\.yaml\]: defaultConfig\.drainDuration: expected a duration string such as "45s", got string "soon"$/,
  });
  t.throws(() => constructProxyConfig(base({ meshConfig: file('defaultConfig:\n  discoveryAdress: x:1\n') })), {
    message: /defaultConfig\.discoveryAdress: unknown field "discoveryAdress" in ProxyConfig/,
  });
  t.throws(() => constructProxyConfig(base({ meshConfig: file('defaultConfig: [\n') })), {
    message: /^failed to unmarshal mesh config from file \[mesh\.yaml\]: /,
  });
  t.throws(() => constructProxyConfig(base({ proxyConfigEnv: '{"proxyMetadata": {"A": 1}}' })), {
    message: 'failed to unmarshal mesh config from environment [PROXY_CONFIG]: PROXY_CONFIG.proxyMetadata.A: expected a string, got number 1',
  });
  t.throws(() => constructProxyConfig(base({ proxyConfigEnv: 'controlPlaneAuthPolicy: SOMETIMES' })), {
    message: /controlPlaneAuthPolicy: expected one of NONE, MUTUAL_TLS, INHERIT/,
  });
  t.throws(() => constructProxyConfig(base({ proxyConfigEnv: 'discoveryAddress: nowhere' })), {
    message: 'invalid proxy config (defaults + PROXY_CONFIG): discoveryAddress: invalid discovery address: "nowhere" is not a valid host:port',
  });
  t.throws(() => constructProxyConfig(base({ proxyConfigEnv: '- a\n- b\n' })), {
    message: /PROXY_CONFIG: expected a ProxyConfig object, got a list/,
  });
});

t.test('unknown top-level MeshConfig fields warn; known ones and an empty file are fine', async (t) => {
  const r = constructProxyConfig(
    base({ meshConfig: { path: 'm', text: 'accessLogFile: /dev/stdout\nrootNamespace: mesh-system\nfrobnicate: 1\n' } }),
  );
  t.same(r.warnings, ['mesh config file m: unknown MeshConfig field "frobnicate" ignored']);
  t.same(constructProxyConfig(base({ meshConfig: { path: 'm', text: '' } })).proxyConfig, constructProxyConfig(base()).proxyConfig);
});

t.test('proxy log level: Istio splitComponentLog', async (t) => {
  t.same(splitProxyLogLevel('warning', ''), { level: 'warning', componentLevels: '', warnings: [] });
  t.same(splitProxyLogLevel('info,misc:error,upstream:debug', 'ignored:info'), {
    level: 'info',
    componentLevels: 'misc:error,upstream:debug',
    warnings: [],
  });
  t.same(
    splitProxyLogLevel('debug', 'misc:error'),
    { level: 'debug', componentLevels: 'misc:error', warnings: [] },
    'the deprecated flag applies when the level names no components',
  );
  t.same(splitProxyLogLevel('info,a:b:c', '').warnings, ['dropping invalid log level: a:b:c']);
  t.equal(checkProxyLogLevels('warning', 'misc:error'), undefined);
  t.match(checkProxyLogLevels('loud', ''), /invalid --proxyLogLevel "loud"/);
  t.match(checkProxyLogLevels('info', 'misc:shout'), /invalid component log level "misc:shout"/);
});
