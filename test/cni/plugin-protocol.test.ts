// The CNI protocol pieces of mesh-cni as tables, against the CNI specification and the reference
// skeleton's behaviour (containernetworking/cni v1.2.3 pkg/skel, pkg/types): which variables each command
// needs, the error codes, CNI_ARGS, and the result handed on for each spec version.
import t from 'tap';
import { resultFor, type PluginConfig } from '../../src/cni/plugin/config';
import { argsFromEnv, CniError, configVersion, parseK8sArgs, validateNetworkConfig, versionAtLeast } from '../../src/cni/plugin/skel';
import { extractPodInfo, skipReason } from '../../src/cni/plugin/pod';
import { newRedirect } from '../../src/cni/plugin/redirect';

const full = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'c1', CNI_NETNS: '/run/netns/x', CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin' };

function code(f: () => unknown): number | string {
  try {
    f();
    return 'no error';
  } catch (e) {
    return e instanceof CniError ? e.code : String(e);
  }
}

t.test('required variables per command (skel), code 4 for a missing one', async (t) => {
  const rows: Array<[string, Record<string, string>, number | string]> = [
    ['ADD with everything', full, 'no error'],
    ['ADD without CNI_NETNS', { ...full, CNI_NETNS: '' }, 4],
    ['ADD without CNI_CONTAINERID', { ...full, CNI_CONTAINERID: '' }, 4],
    ['ADD without CNI_PATH', { ...full, CNI_PATH: '' }, 4],
    ['DEL without CNI_NETNS (the namespace may be gone)', { ...full, CNI_COMMAND: 'DEL', CNI_NETNS: '' }, 'no error'],
    ['CHECK without CNI_IFNAME', { ...full, CNI_COMMAND: 'CHECK', CNI_IFNAME: '' }, 4],
    ['VERSION alone', { CNI_COMMAND: 'VERSION' }, 'no error'],
    ['no CNI_COMMAND', {}, 4],
    ['unknown CNI_COMMAND', { ...full, CNI_COMMAND: 'FROB' }, 4],
    ['container id with invalid characters', { ...full, CNI_CONTAINERID: 'a/b' }, 4],
    ['interface name too long', { ...full, CNI_IFNAME: 'a-very-long-name0' }, 4],
  ];
  for (const [name, env, want] of rows)
    t.equal(
      code(() => argsFromEnv(env)),
      want,
      name,
    );
  const err = t.throws(() => argsFromEnv({ CNI_COMMAND: 'ADD', CNI_PATH: '/x', CNI_IFNAME: 'eth0' }), 'ADD without a container id and a namespace');
  t.equal((err as CniError).msg, 'required env variables [CNI_CONTAINERID,CNI_NETNS] missing', 'all missing ones named, in skel order');
});

t.test('network configuration: decoding failure (6), invalid configuration (7), version', async (t) => {
  t.equal(
    code(() => validateNetworkConfig('{"name": ')),
    6,
  );
  t.equal(
    code(() => validateNetworkConfig('[]')),
    6,
  );
  t.equal(
    code(() => validateNetworkConfig('{"type": "mesh-cni"}')),
    7,
  );
  t.equal(
    code(() => validateNetworkConfig('{"name": "bad name"}')),
    7,
  );
  t.equal(configVersion(validateNetworkConfig('{"name": "n"}')), '0.1.0', 'no cniVersion is the first spec version');
  t.ok(versionAtLeast('1.0.0', '0.4.0'));
  t.notOk(versionAtLeast('0.3.1', '0.4.0'));
  const err = new CniError(7, 'missing network name');
  t.same(err.toJSON('1.0.0'), { cniVersion: '1.0.0', code: 7, msg: 'missing network name' }, 'spec error object, details left out when empty');
});

t.test('CNI_ARGS as types.LoadArgs reads them into Kubernetes args', async (t) => {
  t.same(parseK8sArgs('IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=c;K8S_POD_UID=u;X=y'), {
    podName: 'p',
    podNamespace: 'ns',
    infraContainerID: 'c',
    podUID: 'u',
  });
  t.throws(() => parseK8sArgs('K8S_POD_NAME=p;X=y'), /ARGS: unknown args \["X=y"\]/);
  t.throws(() => parseK8sArgs('K8S_POD_NAME'), /ARGS: invalid pair "K8S_POD_NAME"/);
  t.same(parseK8sArgs(''), { podName: '', podNamespace: '', infraContainerID: '', podUID: '' });
});

t.test('the result handed on: prevResult in the configuration version, or an empty result', async (t) => {
  const conf = (cniVersion: string, prevResult?: Record<string, unknown>): PluginConfig => ({
    cniVersion,
    name: 'n',
    type: 'mesh-cni',
    pluginLogLevel: '',
    cniAgentRunDir: '',
    ambientEnabled: false,
    excludeNamespaces: [],
    podNamespace: '',
    ...(prevResult ? { prevResult } : {}),
  });
  const prev = {
    cniVersion: '1.0.0',
    interfaces: [{ name: 'eth0', sandbox: '/x' }],
    ips: [{ address: 'fd00::2/64', interface: 0 }],
    dns: { nameservers: ['10.0.0.10'] },
  };
  t.same(resultFor(conf('1.0.0', prev)), {
    cniVersion: '1.0.0',
    interfaces: [{ name: 'eth0', sandbox: '/x' }],
    ips: [{ interface: 0, address: 'fd00::2/64' }],
    dns: { nameservers: ['10.0.0.10'] },
  });
  t.same(resultFor(conf('0.4.0', prev)).ips, [{ version: '6', interface: 0, address: 'fd00::2/64' }], '0.3.x/0.4.0 results carry the IP version');
  t.same(resultFor(conf('1.0.0')), { cniVersion: '1.0.0', dns: {} }, 'first in a chain: an empty result');
});

t.test('which pods are left alone (Istio doAddRun order)', async (t) => {
  const pod = (over: { annotations?: Record<string, string>; labels?: Record<string, string>; containers?: unknown[]; init?: unknown[] }) => ({
    metadata: { annotations: over.annotations ?? { 'sidecar.mesh.io/status': '{}' }, labels: over.labels ?? {} },
    spec: { initContainers: over.init ?? [], containers: over.containers ?? [{ name: 'app' }, { name: 'mesh-proxy', args: ['proxy', 'sidecar'] }] },
  });
  const rows: Array<[string, unknown, RegExp | undefined]> = [
    ['a sidecar pod', pod({}), undefined],
    ['mesh-init present (not a CNI install)', pod({ init: [{ name: 'mesh-init' }] }), /mesh-init/],
    ['DISABLE_ENVOY', pod({ containers: [{ name: 'mesh-proxy', env: [{ name: 'DISABLE_ENVOY', value: 'true' }] }] }), /DISABLE_ENVOY/],
    ['no proxy container', pod({ containers: [{ name: 'app' }] }), /no mesh-proxy container/],
    ['a gateway', pod({ containers: [{ name: 'mesh-proxy', args: ['proxy', 'router'] }] }), /proxy type router/],
    ['inject=false annotation', pod({ annotations: { 'sidecar.mesh.io/status': '{}', 'sidecar.mesh.io/inject': 'false' } }), /injection is disabled/],
    [
      'inject label wins over the annotation',
      pod({ annotations: { 'sidecar.mesh.io/status': '{}', 'sidecar.mesh.io/inject': 'false' }, labels: { 'sidecar.mesh.io/inject': 'true' } }),
      undefined,
    ],
    ['no status annotation', pod({ annotations: {} }), /no sidecar.mesh.io\/status annotation/],
    [
      'proxy as a native sidecar (init container)',
      pod({ init: [{ name: 'mesh-proxy', args: ['proxy', 'sidecar'] }], containers: [{ name: 'app' }] }),
      undefined,
    ],
  ];
  for (const [name, p, want] of rows) {
    const why = skipReason(extractPodInfo(p));
    if (want) t.match(why, want, name);
    else t.equal(why, undefined, name);
  }
  t.throws(
    () =>
      newRedirect(extractPodInfo(pod({ annotations: { 'sidecar.mesh.io/status': '{}', 'traffic.sidecar.mesh.io/includeInboundPorts': '80,http' } }))),
    /traffic\.sidecar\.mesh\.io\/includeInboundPorts="80,http" is invalid/,
    'a bad annotation names itself',
  );
});
