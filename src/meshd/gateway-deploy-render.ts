// Renders the injector's `kube-gateway` template for one Gateway, as Istio 1.26's DeploymentController.render
// (pilot/pkg/config/kube/gateway/deploymentcontroller.go): the template data is Istio's derivedInput (the Gateway's
// promoted fields, TemplateInput, ProxyImage, ProxyConfig, MeshConfig, Values), the output split into objects.
// The injector configuration is the running injection webhook's (its ConfigMap or files) when there is one, else the
// built-in one. Differs on purpose: no overlays (class defaults ConfigMaps, parametersRef), so the
// HorizontalPodAutoscaler and PodDisruptionBudget documents are dropped, as Istio drops them without an overlay.
import type { DeployInput } from '../config/gateway-api/deploy';
import { builtinInjectConfig } from '../inject/config';
import { parseTemplates, parseValues, proxyImage } from '../inject/inject';
import { defaultMeshConfig, readMeshConfig } from '../inject/mesh';
import { MeshConfigView, PlainStruct, ProxyConfigView } from '../inject/views';
import { parseGoYaml, splitYamlDocuments } from '../lib/goyaml-parse';
import { goView } from '../orch/goview';
import type { Json } from '../orch/typed';
import type { InjectorState } from './inject-webhook';

type Obj = Record<string, any>;

/** Kinds Istio applies only with an overlay (requiredOverlays). */
const OVERLAY_ONLY = new Set(['HorizontalPodAutoscaler', 'PodDisruptionBudget']);

/** The built-in injector configuration, when no webhook runs. */
export function builtinInjectorState(env: Readonly<Record<string, string | undefined>>): InjectorState {
  const b = builtinInjectConfig();
  let meshConfig;
  try {
    meshConfig = readMeshConfig(b.meshText, 'built-in mesh config');
  } catch {
    meshConfig = defaultMeshConfig();
  }
  return { config: b.config, templates: parseTemplates(b.config.templates, env), values: parseValues(b.valuesText, 'built-in values'), meshConfig };
}

export function renderKubeGateway(state: InjectorState, input: DeployInput, env: Readonly<Record<string, string | undefined>>): Obj[] {
  const t = state.templates.get('kube-gateway');
  if (!t) throw new Error('no "kube-gateway" template defined');
  const gw = input.gateway;
  const meta = gw.metadata as Obj;
  const pc = state.meshConfig.defaultConfig;
  const data = new PlainStruct('gateway.derivedInput', {
    TypeMeta: new PlainStruct('v1.TypeMeta', { Kind: 'Gateway', APIVersion: gw.apiVersion }),
    ObjectMeta: goView(meta as Json, 'meta.ObjectMeta'),
    Name: meta.name,
    Namespace: meta.namespace,
    UID: meta.uid,
    Labels: meta.labels ?? {},
    Annotations: meta.annotations ?? {},
    Spec: new PlainStruct('v1.GatewaySpec', {
      GatewayClassName: gw.spec.gatewayClassName,
      Addresses: ((gw.spec.addresses ?? []) as Obj[]).map(
        (a) => new PlainStruct('v1.GatewaySpecAddress', { Type: a.type ?? 'IPAddress', Value: a.value }),
      ),
    }),
    DeploymentName: input.deploymentName,
    ServiceAccount: input.serviceAccount,
    Ports: input.ports.map((p) => new PlainStruct('v1.ServicePort', { Name: p.name, Port: BigInt(p.port), AppProtocol: p.appProtocol })),
    ServiceType: input.serviceType,
    ClusterID: input.clusterId,
    KubeVersion: BigInt(input.kubeVersion),
    Revision: input.revision,
    ProxyUID: 1337n,
    ProxyGID: 1337n,
    CompliancePolicy: env.COMPLIANCE_POLICY ?? '',
    InfrastructureLabels: input.infrastructureLabels,
    InfrastructureAnnotations: input.infrastructureAnnotations,
    GatewayNameLabel: input.gatewayNameLabel,
    ProxyImage: proxyImage(state.values, pc, (meta.annotations ?? {}) as Record<string, string>),
    ProxyConfig: new ProxyConfigView(pc),
    MeshConfig: new MeshConfigView(state.meshConfig),
    Values: state.values.map,
  });
  return splitYamlDocuments(t.execute(data))
    .map((d) => parseGoYaml(d) as Obj | null)
    .filter((o): o is Obj => !!o && typeof o.kind === 'string' && !OVERLAY_ONLY.has(o.kind));
}
