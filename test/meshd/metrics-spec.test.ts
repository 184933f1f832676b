// Every metric of doc 1 §4.5 against the built `pilot-discovery discovery` on a real Kubernetes API server
// (../shared/kube): names and Prometheus types come from the spec table, label names from Istio 1.26's
// sources, and the orchestrator objects and configuration below are chosen so that the push-status gauges
// (conflicts, duplicates, clusters without endpoints, unready or unknown proxies), the registry's pending
// endpoints and the worker queues actually move. Names whose behaviour mesh does not have are listed in
// ABSENT with the reason; they must not be exported.
import t from 'tap';
import { built } from '../helpers/binary';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { endpointSlice, type Kube, namespace, pod, podStatus, service, startKube, requireKube } from '../helpers/kube';
import { checkSpecMetrics, parseExposition, sampleSum, specMetrics } from '../helpers/metrics-spec';
import { CDS, EDS, LDS, RDS, sidecarNode, XdsWatch } from '../helpers/xds';
import { waitFor } from '../helpers/wait';

requireKube();

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const NS = 'shop';

/** Label names of Istio 1.26 (pilot/pkg/xds/monitoring.go, crdclient, webhooks, secretcontroller, security/pkg/server/ca…); none when not listed. */
const LABELS: Record<string, readonly string[]> = {
  ca_server_csr_sign_err_count: ['error'],
  controller_sync_errors_total: ['cluster'],
  galley_validation_config_load_error: ['reason'],
  galley_validation_config_update_error: ['reason'],
  galley_validation_failed: ['group', 'version', 'resource', 'reason'],
  galley_validation_passed: ['group', 'version', 'resource'],
  galley_validation_http_error: ['status'],
  mesh_build: ['component', 'tag'],
  meshd_managed_clusters: ['cluster_type'],
  pilot_info: ['version'],
  pilot_inbound_updates: ['type'],
  pilot_orch_cfg_events: ['type', 'event'],
  pilot_k8s_reg_events: ['type', 'event'],
  pilot_push_triggers: ['type'],
  pilot_total_rejected_configs: ['type', 'name'],
  pilot_total_xds_rejects: ['type'],
  pilot_xds: ['version'],
  pilot_xds_cds_reject: ['node', 'err'],
  pilot_xds_config_size_bytes: ['type'],
  pilot_worker_queue_depth: ['queueID'],
  pilot_worker_queue_duration: ['queueID'],
  pilot_worker_queue_latency: ['queueID'],
};

/** Spec names whose behaviour mesh's daemon does not have (reviewed data: each says why). */
const ABSENT: Record<string, string> = {
  ambient_meshd_managed_clusters: "ambient multicluster (Istio's ambient index with AMBIENT_ENABLE_MULTI_NETWORK): mesh has no ambient data plane",
  ambient_remote_cluster_sync_timeouts_total:
    "ambient multicluster (Istio's ambient index with AMBIENT_ENABLE_MULTI_NETWORK): mesh has no ambient data plane",
  num_outgoing_retries:
    "Istio counts retries of its CA client's CSR calls (pkg/security CARetryInterceptor); the daemon sends no CSR to another CA over gRPC",
  pilot_proxy_filter_status: 'EnvoyFilter is validated and stored, but not applied to generated configuration, so there is no filter status',
};

let kube: Kube;
let daemon: RunningDaemon;

const create = (p: string, o: object) => kube.api.create(p, o);

t.before(async () => {
  kube = await startKube(t, { controllerManager: false });
  for (const ns of ['mesh-system', NS, 'other']) await create('/api/v1/namespaces', namespace(ns));
  const http = { name: 'http', port: 80, targetPort: 8080 };
  // web (HTTP) and web-tcp (TCP) select the same pod port: Istio's inbound listener conflict for web-1's proxy,
  // and web-1 is not ready in web-tcp's slice (pilot_endpoint_not_ready)
  await create(`/api/v1/namespaces/${NS}/services`, service(NS, 'web', { selector: { app: 'web' }, ports: [http] }));
  await create(
    `/api/v1/namespaces/${NS}/services`,
    service(NS, 'web-tcp', { selector: { app: 'web' }, ports: [{ name: 'tcp', port: 9080, targetPort: 8080 }] }),
  );
  await create(`/api/v1/namespaces/${NS}/pods`, pod(NS, 'web-1', { labels: { app: 'web' } }));
  await kube.api.merge(`/api/v1/namespaces/${NS}/pods/web-1`, podStatus('10.1.0.1'), 'status');
  await create(
    `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`,
    endpointSlice(NS, 'web-1', 'web', [{ ip: '10.1.0.1', pod: 'web-1', ready: true }]),
  );
  await create(
    `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`,
    endpointSlice(
      NS,
      'web-tcp-1',
      'web-tcp',
      [{ ip: '10.1.0.1', pod: 'web-1', ready: false, terminating: false }],
      [{ name: 'tcp', port: 8080, protocol: 'TCP' }],
    ),
  );
  // two headless TCP services on one port share the outbound listener 0.0.0.0_5432 (TCP over TCP conflict)
  for (const name of ['db-a', 'db-b']) {
    await create(
      `/api/v1/namespaces/${NS}/services`,
      service(NS, name, { selector: { app: name }, ports: [{ name: 'tcp', port: 5432 }], spec: { clusterIP: 'None' } }),
    );
  }
  // no endpoints at all (pilot_eds_no_instances)
  await create(`/api/v1/namespaces/${NS}/services`, service(NS, 'empty', { selector: { app: 'nobody' }, ports: [http] }));
  // an EndpointSlice naming a pod the API server does not have (pending pod, endpoint without pod)
  await create(`/api/v1/namespaces/${NS}/services`, service(NS, 'orphan', { ports: [http] }));
  await create(
    `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`,
    endpointSlice(NS, 'orphan-1', 'orphan', [{ ip: '10.9.9.9', pod: 'ghost', ready: true }]),
  );
  daemon = await startDaemon(['--orchconfig', kube.kubeconfig], { MESH_ENABLE_CONTROLLER_QUEUE_METRICS: 'true', POD_NAME: 'meshd-0' });

  // Configuration after start (pilot_inbound_updates{type="config"}):
  // the same ServiceEntry host in two namespaces (duplicate clusters), two rules merging one subset name
  // twice (duplicate subsets) whose subset selects none of the DNS endpoints (DNS cluster without
  // endpoints), and two VirtualServices for one host that is no service (duplicate virtual host).
  for (const ns of [NS, 'other']) {
    await create(`/apis/networking.istio.io/v1/namespaces/${ns}/serviceentries`, {
      apiVersion: 'networking.istio.io/v1',
      kind: 'ServiceEntry',
      metadata: { name: 'api', namespace: ns },
      spec: { hosts: ['api.example.com'], ports: [{ number: 80, name: 'http', protocol: 'HTTP' }], resolution: 'DNS', location: 'MESH_EXTERNAL' },
    });
  }
  for (const name of ['api-a', 'api-b']) {
    await create(`/apis/networking.istio.io/v1/namespaces/${NS}/destinationrules`, {
      apiVersion: 'networking.istio.io/v1',
      kind: 'DestinationRule',
      metadata: { name, namespace: NS },
      spec: { host: 'api.example.com', subsets: [{ name: 'v1', labels: { version: 'v1' } }] },
    });
  }
  for (const name of ['ghost-a', 'ghost-b']) {
    await create(`/apis/networking.istio.io/v1/namespaces/${NS}/virtualservices`, {
      apiVersion: 'networking.istio.io/v1',
      kind: 'VirtualService',
      metadata: { name, namespace: NS },
      spec: { hosts: ['ghost.example.com'], http: [{ route: [{ destination: { host: `web.${NS}.svc.cluster.local`, port: { number: 80 } } }] }] },
    });
  }
});
t.teardown(async () => {
  await daemon?.stop();
  kube?.api.close();
});

t.test('doc 1 §4.5: every metric exported with its type and Istio labels, or listed as absent with the reason', async (t) => {
  const web = sidecarNode(NS, '10.1.0.1', 'web-1');
  const stranger = sidecarNode(NS, '10.200.0.9', 'stranger');
  const cds = new XdsWatch(daemon.grpc, web, CDS);
  const lds = new XdsWatch(daemon.grpc, web, LDS);
  const rds = new XdsWatch(daemon.grpc, web, RDS, ['80']);
  const eds = new XdsWatch(daemon.grpc, web, EDS, [`outbound|80||empty.${NS}.svc.cluster.local`]);
  const strangerCds = new XdsWatch(daemon.grpc, stranger, CDS);
  // a workload outside the cluster naming a WorkloadGroup that does not exist: its registration fails
  // (Istio: FailedPrecondition, auto_registration_errors_total) and the stream is closed
  const orphanNode = sidecarNode(NS, '10.200.0.10', 'vm-orphan');
  const orphan = new XdsWatch(daemon.grpc, { ...orphanNode, metadata: { ...orphanNode.metadata, AUTO_REGISTER_GROUP: 'no-such-group' } }, CDS);
  t.teardown(() => [cds, lds, rds, eds, strangerCds, orphan].forEach((w) => w.close()));
  // wait until the configuration made after start is served (the merged subset's cluster exists)
  await cds.until((w) => w.resources.has('outbound|80|v1|api.example.com') || undefined, 'the subset cluster of api.example.com');
  await rds.until(
    (w) => (w.resources.get('80')?.virtualHosts.some((v) => v.domains.includes('ghost.example.com')) ? true : undefined),
    'the ghost.example.com vhost',
  );
  await lds.until((w) => (w.resources.has('0.0.0.0_5432') ? true : undefined), 'the shared TCP listener');
  await strangerCds.until((w) => (w.responses > 0 ? true : undefined), 'CDS for the stranger');
  await eds.until((w) => (w.responses > 0 ? true : undefined), 'EDS of the empty service');

  // an endpoint-only change pushes to the connected proxies (pilot_push_triggers, pilot_inbound_updates{type="eds"})
  await kube.api.merge(`/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices/web-1`, {
    endpoints: [
      { addresses: ['10.1.0.1'], conditions: { ready: true }, targetRef: { kind: 'Pod', name: 'web-1', namespace: NS } },
      { addresses: ['10.1.0.7'], conditions: { ready: true } },
    ],
  });

  const scrape = async () => parseExposition(await (await fetch(`http://${daemon.monitoring}/metrics`)).text());
  const spec = specMetrics(1, '### 4.5');
  t.ok(spec.length >= 61, `the spec lists ${spec.length} daemon metrics`);

  // What the scenario makes move, each from the behaviour Istio gives the metric.
  const moved: Array<[string, Record<string, string>?]> = [
    ['pilot_conflict_inbound_listener'],
    ['pilot_conflict_outbound_listener_tcp_over_current_tcp'],
    ['pilot_destrule_subsets'],
    ['pilot_dns_cluster_without_endpoints'],
    ['pilot_duplicate_proxy_clusters'],
    ['pilot_eds_no_instances'],
    ['pilot_endpoint_not_ready'],
    ['pilot_no_ip'],
    ['pilot_vservice_dup_domain'],
    ['pilot_k8s_endpoints_pending_pod'],
    ['pilot_k8s_endpoints_with_no_pods'],
    ['endpoint_no_pod'],
    ['pilot_pushcontext_init_seconds'],
    ['pilot_inbound_updates', { type: 'config' }],
    ['pilot_inbound_updates', { type: 'eds' }],
    ['pilot_worker_queue_duration', { queueID: 'namespace controller' }],
    ['pilot_worker_queue_latency', { queueID: 'namespace controller' }],
    ['pilot_orch_cfg_events', { type: 'ServiceEntry', event: 'add' }],
    ['pilot_k8s_reg_events'],
    ['pilot_xds'],
    ['pilot_services'],
    ['pilot_virt_services'],
    ['pilot_push_triggers'],
    ['pilot_xds_config_size_bytes', { type: CDS }],
    ['meshd_managed_clusters', { cluster_type: 'local' }],
    ['meshd_uptime_seconds'],
    ['pilot_info'],
    ['mesh_build', { component: 'pilot' }],
    ['ca_server_root_cert_expiry_seconds'],
    ['auto_registration_errors_total'],
  ];
  let exp = await scrape();
  await waitFor(
    () =>
      `still zero: ${moved
        .filter(([n, l]) => !(sampleSum(exp, n, l) > 0))
        .map(([n, l]) => `${n}${l ? JSON.stringify(l) : ''}`)
        .join(', ')}\n${daemon.log().slice(-3000)}`,
    async () => {
      exp = await scrape();
      return moved.every(([n, l]) => sampleSum(exp, n, l) > 0);
    },
    { timeoutMs: 20_000 },
  );
  t.same(checkSpecMetrics(exp, spec, LABELS, ABSENT), [], 'every spec name exported with its type and labels, or absent with a reason');
  // gRPC FAILED_PRECONDITION (9) with Istio's message
  t.match(
    orphan.ended,
    { code: 9, details: /auto-registration WorkloadEntry of vm-orphan\.shop failed: cannot find WorkloadGroup shop\/no-such-group/ },
    'the unregistrable proxy was refused',
  );
  t.equal(sampleSum(exp, 'pilot_destrule_subsets'), 1, 'one host with a repeated subset');
  t.equal(sampleSum(exp, 'pilot_conflict_inbound_listener'), 1, "one proxy (web-1's) with an inbound conflict");
  t.ok(
    exp.samples.get('pilot_worker_queue_depth')?.some((s) => s.labels.queueID === 'namespace controller'),
    'the namespace controller queue reports its depth',
  );

  // /debug/push_status shows the entries behind the gauges, with Istio's messages
  const status = (await (await fetch(`http://${daemon.http}/debug/push_status`)).json()) as Record<
    string,
    Record<string, { proxy?: string; message?: string }>
  >;
  t.same(status.pilot_destrule_subsets?.['api.example.com'], {
    message: 'Duplicate subset v1 found while merging destination rules for api.example.com',
  });
  t.same(status.pilot_conflict_outbound_listener_tcp_over_current_tcp?.['0.0.0.0_5432'], {
    proxy: `web-1.${NS}`,
    message: `Listener=0.0.0.0_5432 Accepted=TCP Rejected=TCP (db-b.${NS}.svc.cluster.local)`,
  });
  // which service is "existing" follows creation time (equal to the second here), then Istio's name order
  const inbound = status.pilot_conflict_inbound_listener?.[`web-1.${NS}`];
  t.equal(inbound?.proxy, `web-1.${NS}`);
  t.match(
    inbound?.message,
    /^Conflicting inbound listener:8080\. existing: (web|web-tcp)\.shop\.svc\.cluster\.local, incoming: (web|web-tcp)\.shop\.svc\.cluster\.local$/,
  );
  t.not(/existing: (\S+),/.exec(inbound?.message ?? '')?.[1], /incoming: (\S+)$/.exec(inbound?.message ?? '')?.[1], 'two different services');
  t.ok(status.pilot_no_ip?.[`stranger.${NS}`], 'the proxy no endpoint names');
  t.notOk(status.pilot_no_ip?.[`web-1.${NS}`], 'not web-1, which services select');
  t.same(status.pilot_eds_no_instances?.[`outbound|80||empty.${NS}.svc.cluster.local`], {});
  t.match(status.pilot_vservice_dup_domain?.['ghost.example.com:80']?.message, 'duplicate domain from virtual service: ghost.example.com:80');
  t.match(
    status.pilot_duplicate_proxy_clusters?.['outbound|80||api.example.com']?.message,
    'Duplicate cluster outbound|80||api.example.com found while pushing CDS',
  );
  t.match(
    status.pilot_dns_cluster_without_endpoints?.['outbound|80|v1|api.example.com']?.message,
    'STRICT_DNS cluster without endpoints outbound|80|v1|api.example.com found while pushing CDS',
  );
});
