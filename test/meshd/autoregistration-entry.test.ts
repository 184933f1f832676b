// Auto-registration as data, against Istio 1.26's pilot/pkg/autoregistration (controller.go and
// controller_test.go TestWorkloadEntryFromGroup), internal/health and serviceentry isHealthy, renamed
// (`istio.io/<x>` → `mesh.io/<x>`).
import t from 'tap';
import {
  autoRegisteredEntryName,
  connected,
  disconnected,
  formatTime,
  healthCondition,
  isStaleReport,
  maxConnectionAge,
  parseTime,
  shouldCleanup,
  shouldMarkConnected,
  shouldMarkDisconnected,
  withCondition,
  workloadEntryFromGroup,
  type RegisteringProxy,
} from '../../src/meshd/autoregistration/entry';
import { workloadEntryHealthy } from '../../src/config/workload-entry';
import { parseReadinessProbe } from '../../src/agent/health/probe';

const proxy = (o: Partial<RegisteringProxy> = {}): RegisteringProxy => ({
  id: 'vm-1.a',
  namespace: 'a',
  ipAddresses: ['10.0.0.1'],
  autoRegisterGroup: 'wg-a',
  labels: {},
  hasReadinessProbe: false,
  ...o,
});

t.test('entry name: <group>-<ip>[-<network>], IPv6 colons as dashes, the last 253 characters of a longer one', async (t) => {
  t.same(autoRegisteredEntryName(proxy()), { name: 'wg-a-10.0.0.1', shortened: false });
  t.same(autoRegisteredEntryName(proxy({ network: 'nw1' })), { name: 'wg-a-10.0.0.1-nw1', shortened: false });
  t.same(autoRegisteredEntryName(proxy({ ipAddresses: ['2001:db8::1'] })), { name: 'wg-a-2001-db8--1', shortened: false });
  const long = 'g'.repeat(250);
  const got = autoRegisteredEntryName(proxy({ autoRegisterGroup: long }));
  t.same(got, { name: `${'g'.repeat(244)}-10.0.0.1`, shortened: true });
  t.same(autoRegisteredEntryName(proxy({ ipAddresses: [] })), { error: 'auto-registration of vm-1.a failed: missing IP addresses' });
  t.same(autoRegisteredEntryName(proxy({ namespace: '' })), { error: 'auto-registration of vm-1.a failed: missing namespace' });
  t.equal(autoRegisteredEntryName(proxy({ autoRegisterGroup: undefined })), undefined);
});

t.test("entry from group (Istio's TestWorkloadEntryFromGroup)", async (t) => {
  const group = {
    apiVersion: 'networking.istio.io/v1',
    name: 'wg-a',
    namespace: 'a',
    uid: 'uid-1',
    spec: {
      metadata: { labels: { foo: 'bar' }, annotations: { foo: 'bar' } },
      template: { ports: { http: 80 }, labels: { app: 'a' }, weight: 1, network: 'nw0', locality: 'rgn1/zone1/subzone1', serviceAccount: 'sa-a' },
    },
  };
  const p = proxy({ network: 'nw1', labels: { merge: 'me', 'istio-locality': 'rgn2.zone2.subzone2' }, locality: 'rgn2/zone2/subzone2' });
  const wantLabels = { app: 'a', foo: 'bar', merge: 'me' };
  t.same(workloadEntryFromGroup('test-we', p, group), {
    apiVersion: 'networking.istio.io/v1',
    kind: 'WorkloadEntry',
    metadata: {
      name: 'test-we',
      namespace: 'a',
      labels: wantLabels,
      annotations: { 'mesh.io/autoRegistrationGroup': 'wg-a', foo: 'bar' },
      ownerReferences: [{ apiVersion: 'networking.istio.io/v1', kind: 'WorkloadGroup', name: 'wg-a', uid: 'uid-1', controller: true }],
    },
    spec: {
      address: '10.0.0.1',
      ports: { http: 80 },
      labels: wantLabels,
      network: 'nw1',
      locality: 'rgn2/zone2/subzone2',
      weight: 1,
      serviceAccount: 'sa-a',
    },
  });
  t.same(group.spec.template.labels, { app: 'a' }, 'the template is not modified');

  const probed = workloadEntryFromGroup('x', proxy({ hasReadinessProbe: true }), { ...group, spec: { template: {} } });
  t.same(
    probed.metadata.annotations,
    { 'mesh.io/autoRegistrationGroup': 'wg-a', 'proxy.mesh.io/health-checks-enabled': 'true' },
    'a readiness probe enables health checks',
  );
  t.same(probed.spec, { address: '10.0.0.1' }, 'template network and locality kept unless the proxy has its own; no labels when none anywhere');
  t.notOk('labels' in probed.metadata);
});

t.test("connect and disconnect marks (Istio's setConnectMeta and RFC3339Nano times)", async (t) => {
  const at = Date.parse('2026-01-02T03:04:05.120Z');
  t.equal(formatTime(at), '2026-01-02T03:04:05.12Z', 'trailing zeros dropped as Go does');
  t.equal(formatTime(Date.parse('2026-01-02T03:04:05Z')), '2026-01-02T03:04:05Z');
  t.equal(parseTime('2026-01-02T03:04:05.123456789Z'), Date.parse('2026-01-02T03:04:05.123Z'));
  t.equal(parseTime('nonsense'), undefined);
  const obj = { metadata: { annotations: { keep: '1', 'mesh.io/disconnectedAt': 'x', 'istio.io/disconnectedAt': 'y' } } };
  t.same(connected(obj, 'meshd-0', at).metadata.annotations, {
    keep: '1',
    'mesh.io/workloadController': 'meshd-0',
    'mesh.io/connectedAt': '2026-01-02T03:04:05.12Z',
  });
  t.same(disconnected(connected(obj, 'meshd-0', at), at + 1000).metadata.annotations, {
    keep: '1',
    'mesh.io/workloadController': 'meshd-0',
    'mesh.io/disconnectedAt': '2026-01-02T03:04:06.12Z',
  });
  t.same(obj.metadata.annotations['mesh.io/disconnectedAt'], 'x', 'the input is not modified');
});

t.test("when to write connected / disconnected (Istio's changeWorkloadEntryStateTo*)", async (t) => {
  const T = Date.parse('2026-01-02T03:00:00Z');
  const ann = (o: Record<string, number | string>) =>
    Object.fromEntries(Object.entries(o).map(([k, v]) => [k, typeof v === 'number' ? formatTime(v) : v]));
  const cases: Array<[string, Record<string, string>, number, boolean]> = [
    ['fresh entry', {}, T, true],
    ['disconnected after this connection was made', ann({ 'mesh.io/disconnectedAt': T + 10 }), T, false],
    ['disconnected before', ann({ 'mesh.io/disconnectedAt': T - 10 }), T, true],
    ['connected later to another daemon', ann({ 'mesh.io/connectedAt': T + 10, 'mesh.io/workloadController': 'other' }), T, false],
    ['already written for this connection', ann({ 'mesh.io/connectedAt': T, 'mesh.io/workloadController': 'me' }), T, false],
    ['same time, other daemon', ann({ 'mesh.io/connectedAt': T, 'mesh.io/workloadController': 'other' }), T, true],
    ["Istio's annotations read too", ann({ 'istio.io/connectedAt': T, 'istio.io/workloadController': 'me' }), T, false],
  ];
  for (const [name, a, con, want] of cases) t.equal(shouldMarkConnected(a, 'me', con), want, name);

  const dcases: Array<[string, Record<string, string>, number, number, boolean]> = [
    ['ours, connected at this connection', ann({ 'mesh.io/connectedAt': T, 'mesh.io/workloadController': 'me' }), T + 5, T, true],
    ['reconnected since', ann({ 'mesh.io/connectedAt': T + 3, 'mesh.io/workloadController': 'me' }), T + 5, T, false],
    ['controlled by another daemon', ann({ 'mesh.io/connectedAt': T, 'mesh.io/workloadController': 'other' }), T + 5, T, false],
    ['disconnect older than the connect written', ann({ 'mesh.io/connectedAt': T, 'mesh.io/workloadController': 'me' }), T - 1, T + 1, false],
  ];
  for (const [name, a, dis, orig, want] of dcases) t.equal(shouldMarkDisconnected(a, 'me', dis, orig), want, name);
});

t.test("cleanup decision (Istio's shouldCleanupEntry)", async (t) => {
  const now = Date.parse('2026-01-02T03:00:00Z');
  const grace = 10_000;
  const maxAge = maxConnectionAge(30 * 60_000);
  t.equal(maxAge, 45 * 60_000, '1.5 × keepaliveMaxServerConnectionAge');
  t.equal(maxConnectionAge(0), Infinity, 'unset: unlimited');
  const auto = { 'mesh.io/autoRegistrationGroup': 'wg' };
  const cases: Array<[string, Record<string, string>, boolean, boolean]> = [
    ['not auto-registered, not health-checked', { 'mesh.io/disconnectedAt': formatTime(now - 60_000) }, false, false],
    ['disconnected past the grace period', { ...auto, 'mesh.io/disconnectedAt': formatTime(now - grace - 1) }, false, true],
    ['disconnected within the grace period', { ...auto, 'mesh.io/disconnectedAt': formatTime(now - grace + 100) }, false, false],
    ['connected recently', { ...auto, 'mesh.io/connectedAt': formatTime(now - 1000) }, false, false],
    [
      'connected longer than a connection lives (daemon and workload died)',
      { ...auto, 'mesh.io/connectedAt': formatTime(now - maxAge - 1) },
      false,
      true,
    ],
    ['neither mark', auto, false, false],
    ['unparsable disconnect time: long past', { ...auto, 'mesh.io/disconnectedAt': 'garbage' }, false, true],
    ['health-checked with a condition', { 'mesh.io/workloadController': 'x', 'mesh.io/disconnectedAt': formatTime(now - grace - 1) }, true, true],
    [
      'health-checked without a condition',
      { 'mesh.io/workloadController': 'x', 'mesh.io/disconnectedAt': formatTime(now - grace - 1) },
      false,
      false,
    ],
  ];
  for (const [name, a, cond, want] of cases) t.equal(shouldCleanup({ annotations: a, hasHealthCondition: cond }, now, grace, maxAge), want, name);
});

t.test("health condition (Istio's transformHealthEvent, UpdateHealth, isHealthy)", async (t) => {
  const now = Date.parse('2026-01-02T03:00:00Z');
  t.same(healthCondition({ healthy: true }, now), {
    type: 'Healthy',
    status: 'True',
    lastProbeTime: '2026-01-02T03:00:00Z',
    lastTransitionTime: '2026-01-02T03:00:00Z',
  });
  const bad = healthCondition({ healthy: false, message: 'connection refused' }, now + 1000);
  t.same(bad, {
    type: 'Healthy',
    status: 'False',
    lastProbeTime: '2026-01-02T03:00:01Z',
    lastTransitionTime: '2026-01-02T03:00:01Z',
    message: 'connection refused',
  });
  t.same(
    withCondition(
      [
        { type: 'Other', status: 'True' },
        { type: 'Healthy', status: 'True' },
      ],
      bad,
    ),
    [{ type: 'Other', status: 'True' }, bad],
  );
  t.equal(isStaleReport([bad], healthCondition({ healthy: true }, now)), true, 'an older probe does not overwrite a newer one');
  t.equal(isStaleReport([bad], healthCondition({ healthy: true }, now + 2000)), false);

  const hc = { 'proxy.mesh.io/health-checks-enabled': 'true' };
  t.equal(workloadEntryHealthy({}, undefined), true, 'not health-checked: healthy');
  t.equal(workloadEntryHealthy(hc, undefined), false, 'health-checked, no condition yet: unhealthy until a probe succeeds');
  t.equal(workloadEntryHealthy(hc, [{ type: 'Healthy', status: 'True' }]), true);
  t.equal(workloadEntryHealthy(hc, [{ type: 'Healthy', status: 'False' }]), false);
  t.equal(
    workloadEntryHealthy({ 'proxy.istio.io/health-checks-enabled': 'true' }, [{ type: 'Healthy', status: 'False' }]),
    false,
    "Istio's annotation read",
  );
  t.equal(
    workloadEntryHealthy({ 'proxy.mesh.io/health-checks-enabled': 'no' }, [{ type: 'Healthy', status: 'False' }]),
    true,
    'an annotation that does not parse as true: not health-checked',
  );
});

t.test("readiness probe with Istio's defaults (fillInDefaults)", async (t) => {
  t.equal(parseReadinessProbe(undefined), undefined);
  t.same(parseReadinessProbe({ httpGet: { port: 8080 } }), {
    initialDelayMs: 0,
    timeoutMs: 1000,
    periodMs: 10_000,
    successThreshold: 1,
    failureThreshold: 1,
    method: { kind: 'httpGet', httpGet: { path: '/', port: 8080, scheme: 'http', httpHeaders: [] } },
  });
  t.same(parseReadinessProbe({ periodSeconds: 2, failureThreshold: 3, httpGet: { path: '/ready', port: 8443, scheme: 'HTTPS' } })?.method, {
    kind: 'httpGet',
    httpGet: { path: '/ready', port: 8443, scheme: 'https', httpHeaders: [] },
  });
  t.same(parseReadinessProbe({ tcpSocket: { port: 9000 } })?.method, { kind: 'tcpSocket', tcpSocket: { port: 9000 } });
  t.same(parseReadinessProbe({ exec: { command: ['true'] } })?.method, { kind: 'exec', exec: { command: ['true'] } });
  t.throws(
    () => parseReadinessProbe({ tcpSocket: { port: 1 }, exec: { command: ['x'] } }),
    /readinessProbe: exactly one of httpGet, tcpSocket, exec or grpc must be set, got tcpSocket, exec/,
  );
  t.throws(() => parseReadinessProbe({ httpGet: { port: 0 } }), /readinessProbe\.httpGet\.port: must be a port number/);
});
