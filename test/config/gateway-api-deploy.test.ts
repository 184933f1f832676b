// The deployment controller's template input as Istio 1.26 builds it (pilot/pkg/config/kube/gateway
// deploymentcontroller.go: extractServicePorts, configureIstioGateway's TemplateInput, extractInfrastructureMetadata),
// as tables, and the built-in `kube-gateway` template rendered from it.
import t from 'tap';
import { deployInput, extractServicePorts } from '../../src/config/gateway-api/deploy';
import { builtinInjectorState, renderKubeGateway } from '../../src/meshd/gateway-deploy-render';

const gw = (annotations: Record<string, string> = {}, extra: Record<string, unknown> = {}) => ({
  apiVersion: 'gateway.networking.k8s.io/v1',
  kind: 'Gateway',
  metadata: { name: 'gw', namespace: 'ns', uid: 'uid-1', labels: { team: 'a' }, annotations },
  spec: { gatewayClassName: 'mesh', listeners: [{ name: 'http', port: 80, protocol: 'HTTP' }], ...extra },
});
const opts = { clusterId: 'Kubernetes', kubeVersion: 136, revision: '' };

t.test('extractServicePorts', async (t) => {
  t.same(
    extractServicePorts([
      { name: 'http', port: 80, protocol: 'HTTP' },
      { name: 'http-again', port: 80, protocol: 'HTTP' },
      { name: 'a.b', port: 443, protocol: 'HTTPS' },
      { name: '', port: 9000, protocol: 'TCP' },
    ]),
    [
      { name: 'status-port', port: 15021, appProtocol: 'tcp' },
      { name: 'http', port: 80, appProtocol: 'http' },
      { name: 'a-b', port: 443, appProtocol: 'https' },
      { name: 'tcp-3', port: 9000, appProtocol: 'tcp' },
    ],
    'status port first; a port once; dots made dashes; an unnamed listener named <protocol>-<index>',
  );
});

t.test('template input', async (t) => {
  const cases: Array<[string, ReturnType<typeof gw>, Partial<ReturnType<typeof deployInput>>]> = [
    ['defaults', gw(), { deploymentName: 'gw-mesh', serviceAccount: 'gw-mesh', serviceType: 'LoadBalancer', infrastructureLabels: { team: 'a' } }],
    [
      'overrides (both groups)',
      gw({ 'gateway.istio.io/name-override': 'edge', 'gateway.mesh.io/service-account': 'edge-sa', 'networking.istio.io/service-type': 'NodePort' }),
      { deploymentName: 'edge', serviceAccount: 'edge-sa', serviceType: 'NodePort' },
    ],
    [
      'spec.infrastructure wins over the Gateway labels, without gateway.networking.k8s.io/ keys',
      gw({}, { infrastructure: { labels: { tier: 'edge', 'gateway.networking.k8s.io/x': 'y' }, annotations: { note: 'n' } } }),
      { infrastructureLabels: { tier: 'edge' }, infrastructureAnnotations: { note: 'n' } },
    ],
  ];
  for (const [name, g, want] of cases) t.match(deployInput(g, opts), want, name);
});

t.test('the built-in kube-gateway template', async (t) => {
  const objs = renderKubeGateway(builtinInjectorState({}), deployInput(gw(), opts), {});
  t.same(
    objs.map((o) => `${o.kind}/${o.metadata.name}`),
    ['ServiceAccount/gw-mesh', 'Deployment/gw-mesh', 'Service/gw-mesh'],
    'no HorizontalPodAutoscaler or PodDisruptionBudget without an overlay',
  );
  const dep = objs[1]!;
  t.same(dep.metadata.ownerReferences, [{ apiVersion: 'gateway.networking.k8s.io/v1beta1', kind: 'Gateway', name: 'gw', uid: 'uid-1' }]);
  t.same(dep.spec.template.spec.containers[0].args.slice(0, 2), ['proxy', 'router']);
  t.equal(dep.spec.template.metadata.labels.team, 'a', 'infrastructure labels reach the pods');
  t.equal(objs[2]!.spec.type, 'LoadBalancer');
});
