// Istio's annotations.K8sAnalyzer: mesh annotations (`*.mesh.io/…`) on Namespaces, Services, Pods and
// Deployments that are unknown, on the wrong kind of resource, deprecated, or whose value the
// injector would reject.
import { isIPv4, isIPv6 } from 'node:net';
import { parse as parseYaml } from 'yaml';
import { applyProxyConfigOverlay, defaultProxyConfig, ProxyConfigError, validateProxyConfig } from '../../config/proxyconfig';
import { ANNOTATIONS, type AnnotationDef } from '../annotations';
import { MESSAGES } from '../messages';
import type { AnalysisContext, Analyzer, Resource } from '../model';
import { lineOf, SIDECAR_INJECT } from '../util';

const BY_NAME = new Map<string, AnnotationDef>(ANNOTATIONS.map((a) => [a.name, a]));
/** maturity.AlwaysIgnoredAnnotations: written by mesh itself. */
const IGNORED = new Set(['sidecar.mesh.io/status', 'gateway.mesh.io/controller-version', 'mesh.io/rev']);
const DEPRECATION_EXTRA: Readonly<Record<string, string>> = { [SIDECAR_INJECT]: ` in favor of the "${SIDECAR_INJECT}" label` };

function isMeshAnnotation(name: string): boolean {
  return name === 'kubernetes.io/ingress.class' || name.split('/')[0]!.endsWith('mesh.io');
}

/** Go's strconv.ParseUint(v, 10, bits) verdict. */
function parseUintError(v: string, bits: 16 | 32): string | undefined {
  if (!/^[0-9]+$/.test(v)) return `strconv.ParseUint: parsing ${JSON.stringify(v)}: invalid syntax`;
  if (BigInt(v) >= 1n << BigInt(bits)) return `strconv.ParseUint: parsing ${JSON.stringify(v)}: value out of range`;
  return undefined;
}

function portListError(param: string, ports: string): string | undefined {
  const t = ports.trim();
  if (t === '') return undefined;
  for (const p of t.split(',')) {
    const e = parseUintError(p.trim(), 16);
    if (e) return `${param} invalid: failed parsing port '${p}': failed parsing port '${p}': ${e}`;
  }
  return undefined;
}

/** netip.ParsePrefix: an IP address and a prefix length within its family's size. */
function cidrListError(cidrs: string): string | undefined {
  if (cidrs === '') return undefined;
  for (const c of cidrs.split(',')) {
    const m = /^([^/]+)\/(\d+)$/.exec(c);
    const ok = m && ((isIPv4(m[1]!) && Number(m[2]) <= 32) || (isIPv6(m[1]!) && Number(m[2]) <= 128));
    if (!ok) return `failed parsing cidr '${c}': netip.ParsePrefix(${JSON.stringify(c)}): invalid prefix`;
  }
  return undefined;
}

const GO_BOOLS = new Set(['1', 't', 'T', 'TRUE', 'true', 'True', '0', 'f', 'F', 'FALSE', 'false', 'False']);

/** inject.AnnotationValidation: the annotations whose values the injector parses. */
const VALIDATORS: Readonly<Record<string, (v: string) => string | undefined>> = {
  'sidecar.mesh.io/interceptionMode': (v) =>
    ['REDIRECT', 'TPROXY', 'NONE'].includes(v) ? undefined : `interceptionMode invalid, use REDIRECT,TPROXY,NONE: ${v}`,
  'status.sidecar.mesh.io/port': (v) => {
    const e = parseUintError(v.trim(), 16);
    return e ? `excludeInboundPorts invalid: failed parsing port '${v}': ${e}` : undefined;
  },
  'readiness.status.sidecar.mesh.io/initialDelaySeconds': (v) => parseUintError(v, 32),
  'readiness.status.sidecar.mesh.io/periodSeconds': (v) => parseUintError(v, 32),
  'readiness.status.sidecar.mesh.io/failureThreshold': (v) => parseUintError(v, 32),
  'traffic.sidecar.mesh.io/includeOutboundIPRanges': (v) => {
    const e = v === '*' ? undefined : cidrListError(v);
    return e ? `includeIPRanges invalid: ${e}` : undefined;
  },
  'traffic.sidecar.mesh.io/excludeOutboundIPRanges': (v) => {
    const e = cidrListError(v);
    return e ? `excludeIPRanges invalid: ${e}` : undefined;
  },
  'traffic.sidecar.mesh.io/includeInboundPorts': (v) => (v === '*' ? undefined : portListError('includeInboundPorts', v)),
  'traffic.sidecar.mesh.io/excludeInboundPorts': (v) => portListError('excludeInboundPorts', v),
  'traffic.sidecar.mesh.io/excludeOutboundPorts': (v) => portListError('excludeOutboundPorts', v),
  'prometheus.mesh.io/merge-metrics': (v) => (GO_BOOLS.has(v) ? undefined : `strconv.ParseBool: parsing ${JSON.stringify(v)}: invalid syntax`),
  'proxy.mesh.io/config': (v) => {
    try {
      const errs = validateProxyConfig(applyProxyConfigOverlay(defaultProxyConfig(), parseYaml(v) ?? {}, 'proxy.mesh.io/config'));
      return errs.length > 0 ? errs.join('; ') : undefined;
    } catch (e) {
      if (e instanceof ProxyConfigError || e instanceof Error) return `failed to convert to apply proxy config: ${e.message}`;
      throw e;
    }
  },
};

function check(ctx: AnalysisContext, r: Resource, kind: string): void {
  for (const [ann, value] of Object.entries(r.annotations)) {
    if (!isMeshAnnotation(ann) || IGNORED.has(ann)) continue;
    const line = lineOf(r, ['metadata', 'annotations', ann]);
    const def = BY_NAME.get(ann);
    if (!def) {
      ctx.report(MESSAGES.UnknownAnnotation, r, [ann], line);
      continue;
    }
    // The inject annotation is deprecated for the label; having both is not worth a word.
    if (def.deprecated && !(ann === SIDECAR_INJECT && SIDECAR_INJECT in r.labels))
      ctx.report(MESSAGES.DeprecatedAnnotation, r, [ann, DEPRECATION_EXTRA[ann] ?? ''], line);
    if (def.resources.includes('Any')) continue;
    if (!def.resources.includes(kind)) {
      ctx.report(MESSAGES.MisplacedAnnotation, r, [ann, def.resources.join(', ')], line);
      continue;
    }
    const err = VALIDATORS[ann]?.(value);
    if (err) ctx.report(MESSAGES.InvalidAnnotation, r, [ann, err], line);
  }
}

export const annotations: Analyzer = {
  name: 'annotations.K8sAnalyzer',
  description: 'Checks for misplaced and invalid Mesh annotations in Kubernetes resources',
  inputs: ['Namespace', 'Service', 'Pod', 'Deployment'],
  analyze(ctx) {
    for (const kind of ['Namespace', 'Service', 'Pod', 'Deployment']) for (const r of ctx.list(kind)) check(ctx, r, kind);
  },
};
