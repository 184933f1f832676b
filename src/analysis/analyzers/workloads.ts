// Analyzers of orchestrator objects (Istio's analyzers/deployment, service, injection, webhook,
// externalcontrolplane): Services and Deployments, sidecar injection of namespaces and pods, the
// injection webhooks.
import { ipFamily } from '../../lib/ip';
import { isObject } from '../../config/values';
import { parseProtocol } from '../../config/validate/protocol';
import { MESSAGES } from '../messages';
import { parse as parseYaml } from 'yaml';
import { type AnalysisContext, type Analyzer, fullName, type Resource, specOf } from '../model';
import {
  containersOf,
  DATAPLANE_MODE_LABEL,
  deploymentInMesh,
  INJECTION_LABEL,
  INJECTOR_CONFIGMAP,
  isControlPlane,
  labelSelectorMatches,
  lineOf,
  podTemplate,
  PROXY_CONTAINER,
  REVISION_LABEL,
  SIDECAR_INJECT,
  setMatches,
} from '../util';

type ServicePort = { name?: string; port?: number; protocol?: string; appProtocol?: string; targetPort?: number | string };

function servicePorts(r: Resource): ServicePort[] {
  const s = specOf(r);
  return (Array.isArray(s.ports) ? s.ports : []).filter(isObject) as ServicePort[];
}

/** intstr's String(): the number or the name; '' when unset. */
function targetPortString(p: ServicePort): string {
  return p.targetPort === undefined ? '' : String(p.targetPort);
}

const WAYPOINT_CONTROLLER = 'mesh.io-mesh-controller';
const GATEWAY_CONTROLLER = 'mesh.io-gateway-controller';
const GATEWAY_MANAGED = 'gateway.mesh.io/managed';

export const multiService: Analyzer = {
  name: 'deployment.MultiServiceAnalyzer',
  description: 'Checks association between services and pods',
  inputs: ['Service', 'Deployment', 'Namespace'],
  analyze(ctx) {
    for (const r of ctx.list('Deployment')) {
      if (r.labels[GATEWAY_MANAGED] === WAYPOINT_CONTROLLER || !deploymentInMesh(r, ctx)) continue;
      const podLabels = podTemplate(r).labels;
      const matching = ctx.list('Service').filter((svc) => {
        const sel: Record<string, string> = specOf(svc).selector ?? {};
        return svc.namespace === r.namespace && Object.keys(sel).length > 0 && Object.entries(sel).every(([k, v]) => podLabels[k] === v);
      });
      // port → protocol → services
      const byPort = new Map<number, Map<string, string[]>>();
      // targetPort → port → service
      const byTarget = new Map<string, Map<number, string>>();
      for (const svc of matching)
        for (const p of servicePorts(svc)) {
          const port = Number(p.port);
          const protocols = byPort.get(port) ?? new Map<string, string[]>();
          const proto = p.protocol || 'TCP';
          protocols.set(proto, [...(protocols.get(proto) ?? []), fullName(svc)]);
          byPort.set(port, protocols);
          let tp = targetPortString(p);
          if (tp === '0' || tp === '') tp = String(port);
          const ports = byTarget.get(tp) ?? new Map<number, string>();
          ports.set(port, fullName(svc));
          byTarget.set(tp, ports);
        }
      const line = lineOf(r, ['metadata', 'name']);
      for (const [port, protocols] of byPort) {
        if (protocols.size <= 1) continue;
        ctx.report(MESSAGES.DeploymentAssociatedToMultipleServices, r, [r.name, port, [...protocols.values()].flat().sort()], line);
      }
      for (const [tp, ports] of byTarget) {
        if (ports.size <= 1) continue;
        ctx.report(MESSAGES.DeploymentConflictingPorts, r, [r.name, [...ports.values()].sort(), tp, [...ports.keys()].sort((a, b) => a - b)], line);
      }
    }
  },
};

const PROXY_UID = 1337;

function runsAsProxyUid(spec: Record<string, unknown>): number {
  let n = 0;
  const sc = isObject(spec.securityContext) ? spec.securityContext : {};
  if (sc.runAsUser === PROXY_UID) n++;
  for (const c of containersOf(spec, false))
    if (c.name !== PROXY_CONTAINER && c.name !== 'mesh-operator' && c.securityContext?.runAsUser === PROXY_UID) n++;
  return n;
}

export const applicationUID: Analyzer = {
  name: 'applicationUID.Analyzer',
  description: 'Checks invalid application UID',
  inputs: ['Pod', 'Deployment'],
  analyze(ctx) {
    for (const r of ctx.list('Pod')) {
      if (isControlPlane(r)) continue;
      for (let i = runsAsProxyUid(specOf(r)); i > 0; i--) ctx.report(MESSAGES.InvalidApplicationUID, r, []);
    }
    for (const r of ctx.list('Deployment')) {
      if (isControlPlane(r)) continue;
      for (let i = runsAsProxyUid(podTemplate(r).spec); i > 0; i--) ctx.report(MESSAGES.InvalidApplicationUID, r, []);
    }
  },
};

const WELL_KNOWN_TCP_PORTS = new Set([25, 53, 3306, 27017]);

/** kube.ConvertProtocol is unsupported: no protocol can be read from the appProtocol or the port name. */
function unsupportedProtocol(p: ServicePort): boolean {
  if (p.protocol === 'UDP') return false;
  let name = p.name ?? '';
  if (p.appProtocol !== undefined) {
    name = p.appProtocol;
    if (['kubernetes.io/h2c', 'kubernetes.io/ws', 'kubernetes.io/wss'].includes(name)) return false;
  }
  if (name.slice(0, 8).toLowerCase() === 'grpc-web' && name.length >= 8) return false;
  const prefix = name.includes('-') ? name.slice(0, name.indexOf('-')) : name;
  if (!parseProtocol(prefix).unsupported) return false;
  return !WELL_KNOWN_TCP_PORTS.has(Number(p.port));
}

export const portName: Analyzer = {
  name: 'service.PortNameAnalyzer',
  description: 'Checks the port names associated with each service',
  inputs: ['Service'],
  analyze(ctx) {
    for (const r of ctx.list('Service')) {
      if (isControlPlane(r)) continue;
      const managed = r.labels[GATEWAY_MANAGED];
      if (managed === GATEWAY_CONTROLLER || managed === WAYPOINT_CONTROLLER) continue;
      const externalName = specOf(r).type === 'ExternalName';
      servicePorts(r).forEach((p, i) => {
        if (!unsupportedProtocol(p) && !(p.name === 'tcp' && externalName)) return;
        const line = lineOf(r, ['spec', 'ports', i, 'port']);
        if (externalName) ctx.report(MESSAGES.ExternalNameServiceTypeInvalidPortName, r, [], line);
        else ctx.report(MESSAGES.PortNameIsNotUnderNamingConvention, r, [p.name ?? '', Number(p.port), targetPortString(p)], line);
      });
    }
  },
};

/** The injector values' sidecarInjectorWebhook.enableNamespacesByDefault. */
function enableNamespacesByDefault(cm: Resource): boolean {
  const data = isObject(cm.object.data) ? cm.object.data : {};
  try {
    const v = JSON.parse(String(data.values ?? ''));
    return v?.sidecarInjectorWebhook?.enableNamespacesByDefault === true;
  } catch {
    return false;
  }
}

function injectorConfigMapName(revision: string | undefined): string {
  return !revision || revision === 'default' ? INJECTOR_CONFIGMAP : `${INJECTOR_CONFIGMAP}-${revision}`;
}

export const injection: Analyzer = {
  name: 'injection.Analyzer',
  description: 'Checks conditions related to Mesh sidecar injection',
  inputs: ['Namespace', 'Pod', 'ConfigMap'],
  analyze(ctx) {
    const injected = new Set<string>();
    let byDefault = false;
    for (const r of ctx.list('Namespace')) {
      if (r.name === ctx.meshNamespace) continue;
      const inj = r.labels[INJECTION_LABEL];
      const rev = r.labels[REVISION_LABEL];
      const labels: string[] = [];
      if (inj !== undefined) labels.push(`${INJECTION_LABEL}=${inj}`);
      for (const l of [REVISION_LABEL, DATAPLANE_MODE_LABEL])
        if (l in r.labels && (inj === undefined || inj === 'enabled')) labels.push(`${l}=${r.labels[l]}`);
      if (labels.length > 1) ctx.report(MESSAGES.NamespaceMultipleInjectionLabels, r, [labels]);
      if (r.labels[DATAPLANE_MODE_LABEL] === 'ambient') continue;
      const cm = ctx.list('ConfigMap').find((c) => c.name === injectorConfigMapName(rev));
      if (cm) byDefault = enableNamespacesByDefault(cm);
      if (!inj && rev === undefined) {
        if (byDefault) ctx.report(MESSAGES.NamespaceInjectionEnabledByDefault, r, []);
        else ctx.report(MESSAGES.NamespaceNotInjected, r, [r.name, r.name], lineOf(r, ['metadata', 'name']));
        continue;
      }
      if (inj === 'enabled') injected.add(r.name);
    }
    for (const r of ctx.list('Pod')) {
      if (!injected.has(r.namespace)) continue;
      const inj = r.labels[SIDECAR_INJECT] ?? r.annotations[SIDECAR_INJECT] ?? '';
      if (inj.toLowerCase() === 'false') continue;
      const spec = specOf(r);
      if (spec.hostNetwork === true) continue;
      const proxy = containersOf(spec).find((c) => c.name === PROXY_CONTAINER);
      if (!proxy?.image) ctx.report(MESSAGES.PodMissingProxy, r, [fullName(r)]);
    }
  },
};

/** injection.GetIstioProxyImage: the proxy image the injector configuration names. */
function injectorProxyImage(cm: Resource): string {
  const data = isObject(cm.object.data) ? cm.object.data : {};
  try {
    const g = JSON.parse(String(data.values ?? ''))?.global ?? {};
    const image = String(g.proxy?.image ?? '');
    return image.includes('/') ? image : `${g.hub ?? ''}/${image}:${g.tag ?? ''}`;
  } catch {
    return '';
  }
}

export const image: Analyzer = {
  name: 'injection.ImageAnalyzer',
  description: 'Checks the image of auto-injection configured with the running proxies on pods',
  inputs: ['Namespace', 'Pod', 'ConfigMap', 'ProxyConfig'],
  analyze(ctx) {
    const images = new Map<string, string>();
    for (const cm of ctx.list('ConfigMap')) if (cm.name.startsWith(INJECTOR_CONFIGMAP)) images.set(cm.name, injectorProxyImage(cm));
    if (images.size === 0) return;
    const injected = new Map<string, string>();
    for (const ns of ctx.list('Namespace')) {
      const rev = ns.labels[REVISION_LABEL];
      if (ns.labels[INJECTION_LABEL] === 'enabled' || rev !== undefined) injected.set(ns.name, rev ?? 'default');
    }
    const mismatched = new Map<string, string[]>();
    for (const pod of ctx.list('Pod')) {
      const rev = injected.get(pod.namespace);
      if (rev === undefined || pod.annotations['sidecar.mesh.io/proxyImage']) continue;
      const variant = proxyImageType(ctx, pod);
      for (const c of containersOf(specOf(pod))) {
        if (c.name !== PROXY_CONTAINER) continue;
        const want = images.get(injectorConfigMapName(rev));
        if (want === undefined) break;
        if (c.image !== want && c.image !== `${want}-${variant}`) mismatched.set(pod.namespace, [...(mismatched.get(pod.namespace) ?? []), pod.name]);
      }
    }
    for (const [ns, podNames] of mismatched) {
      const nsRes = ctx.find('Namespace', '', ns);
      if (nsRes) ctx.report(MESSAGES.PodsIstioProxyImageMismatchInNamespace, nsRes, [podNames.sort()]);
    }
  },
};

/**
 * EffectiveProxyConfigResolver.ImageType: the mesh default, then the root namespace's ProxyConfig,
 * the pod namespace's, a selecting one, the pod's proxy.mesh.io/config annotation; `default` is none.
 */
function proxyImageType(ctx: AnalysisContext, pod: Resource): string {
  let variant = ctx.mesh.defaultImageType;
  const type = (pc: Resource): string => specOf(pc).image?.imageType ?? '';
  const pcs = ctx.list('ProxyConfig');
  for (const pc of pcs) if (pc.namespace === ctx.mesh.rootNamespace && type(pc)) variant = type(pc);
  for (const pc of pcs)
    if (pc.namespace !== ctx.mesh.rootNamespace && pc.namespace === pod.namespace && !specOf(pc).selector && type(pc)) variant = type(pc);
  for (const pc of pcs) {
    if (pc.namespace === ctx.mesh.rootNamespace || !specOf(pc).selector || !fullName(pc).startsWith(pod.namespace)) continue;
    if (setMatches(specOf(pc).selector?.matchLabels ?? {}, pod.labels) && type(pc)) variant = type(pc);
  }
  const anno = pod.annotations['proxy.mesh.io/config'];
  if (anno) {
    try {
      const v = parseYaml(anno);
      if (isObject(v) && isObject(v.image) && typeof v.image.imageType === 'string' && v.image.imageType) variant = v.image.imageType;
    } catch {
      // an unreadable annotation does not change the variant (ApplyYAML failed)
    }
  }
  return variant === 'default' ? '' : variant;
}

type Webhook = {
  name?: string;
  namespaceSelector?: unknown;
  objectSelector?: unknown;
  clientConfig?: { url?: string; service?: { name?: string; namespace?: string } };
};

function webhooksOf(r: Resource): Webhook[] {
  return (Array.isArray(r.object.webhooks) ? r.object.webhooks : []).filter(isObject) as Webhook[];
}

export const imageAuto: Analyzer = {
  name: 'injection.ImageAutoAnalyzer',
  description: 'Makes sure that Pods and Deployments with `image: auto` are going to be injected',
  inputs: ['Namespace', 'Pod', 'Deployment', 'MutatingWebhookConfiguration'],
  analyze(ctx) {
    const hooks = ctx.list('MutatingWebhookConfiguration').flatMap((r) => webhooksOf(r).filter((w) => (w.name ?? '').endsWith('mesh.io')));
    const auto = (spec: Record<string, unknown>): boolean => containersOf(spec, false).some((c) => c.name === PROXY_CONTAINER && c.image === 'auto');
    for (const r of ctx.list('Pod')) if (auto(specOf(r))) ctx.report(MESSAGES.ImageAutoWithoutInjectionError, r, ['Pod', r.name]);
    for (const r of ctx.list('Deployment')) {
      const t = podTemplate(r);
      if (!auto(t.spec)) continue;
      const nsLabels = ctx.find('Namespace', '', r.namespace || 'default')?.labels ?? {};
      if (!hooks.some((w) => labelSelectorMatches(w.namespaceSelector, nsLabels) && labelSelectorMatches(w.objectSelector, t.labels)))
        ctx.report(MESSAGES.ImageAutoWithoutInjectionWarning, r, ['Deployment', r.name]);
    }
  },
};

function revisionsOf(r: Resource): string[] {
  const out = new Set<string>();
  if (r.labels[REVISION_LABEL] !== undefined) out.add(r.labels[REVISION_LABEL]!);
  for (const w of webhooksOf(r))
    for (const sel of [w.namespaceSelector, w.objectSelector]) {
      if (!isObject(sel)) continue;
      const ml = isObject(sel.matchLabels) ? sel.matchLabels : {};
      if (typeof ml[REVISION_LABEL] === 'string') out.add(ml[REVISION_LABEL] as string);
      for (const e of Array.isArray(sel.matchExpressions) ? sel.matchExpressions.filter(isObject) : [])
        if (e.key === REVISION_LABEL) for (const v of Array.isArray(e.values) ? e.values : []) out.add(String(v));
    }
  return [...out];
}

export const webhook: Analyzer = {
  name: 'webhook.Analyzer',
  description: 'Checks the validity of Mesh webhooks',
  inputs: ['MutatingWebhookConfiguration', 'Service'],
  analyze(ctx) {
    const hooks = new Map<string, { res: Resource; hooks: Webhook[] }>();
    const revisions = new Set<string>();
    for (const r of ctx.list('MutatingWebhookConfiguration')) {
      const revs = revisionsOf(r);
      if (revs.length === 0 && !webhooksOf(r).some((w) => (w.name ?? '').endsWith('mesh.io'))) continue;
      hooks.set(fullName(r), { res: r, hooks: webhooksOf(r) });
      for (const v of revs) revisions.add(v);
    }
    const nsBase = (): Array<Record<string, string>> => [{}, { [INJECTION_LABEL]: 'enabled' }, { [INJECTION_LABEL]: 'disabled' }];
    const objBase = (): Array<Record<string, string>> => [{}, { [SIDECAR_INJECT]: 'true' }, { [SIDECAR_INJECT]: 'false' }];
    const nsLabels = nsBase();
    const objLabels = objBase();
    for (const rev of [...revisions].sort()) {
      for (const b of nsBase()) nsLabels.push({ ...b, [REVISION_LABEL]: rev });
      for (const b of objBase()) objLabels.push({ ...b, [REVISION_LABEL]: rev });
    }
    for (const nl of nsLabels)
      for (const ol of objLabels) {
        const matches = new Map<string, Resource>();
        for (const [name, { res, hooks: whs }] of hooks)
          for (const w of whs)
            if (labelSelectorMatches(w.namespaceSelector, nl) && labelSelectorMatches(w.objectSelector, ol))
              matches.set(`${name}/${w.name ?? ''}`, res);
        if (matches.size <= 1) continue;
        for (const [m, res] of matches) {
          const others = [...matches.keys()].filter((x) => x !== m).sort();
          ctx.report(MESSAGES.InvalidWebhook, res, [`Webhook overlaps with others: [${others.join(' ')}]. This may cause injection to occur twice.`]);
        }
      }
    for (const { res, hooks: whs } of hooks.values())
      for (const w of whs) {
        const svc = w.clientConfig?.service;
        if (!svc) continue;
        if (!ctx.find('Service', svc.namespace ?? '', svc.name ?? ''))
          ctx.report(MESSAGES.InvalidWebhook, res, [
            `Injector refers to a control plane service that does not exist: ${svc.namespace ?? ''}/${svc.name ?? ''}.`,
          ]);
      }
  },
};

/** lintWebhookURL: url.Parse's verdict and whether the host is an IP address. */
function webhookUrl(u: string): { error?: string; ip?: boolean } {
  let parsed: URL;
  try {
    parsed = new URL(u);
  } catch {
    return { error: 'was provided in an invalid format' };
  }
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  return { ip: ipFamily(host) !== 0 };
}

export const externalControlPlane: Analyzer = {
  name: 'externalcontrolplane.ExternalControlPlaneAnalyzer',
  description: 'Checks that the remote MeshOperator resources reference an external control plane',
  inputs: ['ValidatingWebhookConfiguration', 'MutatingWebhookConfiguration'],
  analyze(ctx) {
    const check = (r: Resource, w: Webhook): void => {
      const url = w.clientConfig?.url;
      if (url !== undefined) {
        const res = webhookUrl(url);
        if (res.error) ctx.report(MESSAGES.InvalidExternalControlPlaneConfig, r, [url, w.name ?? '', res.error]);
        else if (res.ip) ctx.report(MESSAGES.ExternalControlPlaneAddressIsNotAHostname, r, [url, w.name ?? '']);
      } else if (!w.clientConfig?.service) {
        ctx.report(MESSAGES.InvalidExternalControlPlaneConfig, r, ['', w.name ?? '', 'is blank']);
      }
    };
    for (const r of ctx.list('ValidatingWebhookConfiguration'))
      if (r.name === 'meshd-default-validator' || r.name.startsWith('mesh-validator')) for (const w of webhooksOf(r)) check(r, w);
    for (const r of ctx.list('MutatingWebhookConfiguration')) if (r.name.startsWith(INJECTOR_CONFIGMAP)) for (const w of webhooksOf(r)) check(r, w);
  },
};
