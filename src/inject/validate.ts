// Checks of the annotations that steer injection (Istio's inject/validate.go), with Istio's messages:
// `invalid value '<value>' for annotation '<key>': <why>`.
import { goBool, goBoolError } from '../lib/gostrconv';
import { applyProxyConfigText, defaultProxyConfig, MeshConfigError, validateProxyConfig } from './mesh';

type Check = (value: string) => string | undefined;

function parsePort(s: string): string | undefined {
  const t = s.trim();
  if (!/^\d+$/.test(t) || Number(t) > 65535) {
    const why = /^\d+$/.test(t) ? 'value out of range' : 'invalid syntax';
    return `failed parsing port '${s}': strconv.ParseUint: parsing ${JSON.stringify(t)}: ${why}`;
  }
  return undefined;
}

function portList(param: string): Check {
  return (ports) => {
    const t = ports.trim();
    if (t.length === 0) return undefined;
    for (const p of t.split(',')) {
      const e = parsePort(p);
      if (e) return `${param} invalid: failed parsing port '${p}': ${e}`;
    }
    return undefined;
  };
}

/** netip.ParsePrefix acceptance. */
function prefixError(cidr: string): string | undefined {
  const slash = cidr.lastIndexOf('/');
  if (slash < 0) return `netip.ParsePrefix(${JSON.stringify(cidr)}): no '/'`;
  const addr = cidr.slice(0, slash);
  const bits = cidr.slice(slash + 1);
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(addr);
  const isV4 = !!v4 && v4.slice(1).every((o) => Number(o) <= 255 && !(o.length > 1 && o.startsWith('0')));
  const isV6 = !isV4 && addr.includes(':') && /^[0-9a-fA-F:.]+$/.test(addr);
  if (!isV4 && !isV6) return `netip.ParsePrefix(${JSON.stringify(cidr)}): ParseAddr(${JSON.stringify(addr)}): unable to parse IP`;
  if (!/^\d+$/.test(bits) || (bits.length > 1 && bits.startsWith('0')))
    return `netip.ParsePrefix(${JSON.stringify(cidr)}): bad bits after slash: ${JSON.stringify(bits)}`;
  if (Number(bits) > (isV4 ? 32 : 128)) return `netip.ParsePrefix(${JSON.stringify(cidr)}): prefix length out of range`;
  return undefined;
}

function cidrList(cidrs: string): string | undefined {
  if (cidrs.length === 0) return undefined;
  for (const c of cidrs.split(',')) {
    const e = prefixError(c);
    if (e) return `failed parsing cidr '${c}': ${e}`;
  }
  return undefined;
}

function uint32(v: string): string | undefined {
  if (!/^\d+$/.test(v)) return `strconv.ParseUint: parsing ${JSON.stringify(v)}: invalid syntax`;
  if (BigInt(v) > 4294967295n) return `strconv.ParseUint: parsing ${JSON.stringify(v)}: value out of range`;
  return undefined;
}

function bool(v: string): string | undefined {
  return goBool(v) === undefined ? goBoolError(v) : undefined;
}

const CHECKS: Readonly<Record<string, Check>> = {
  'sidecar.mesh.io/interceptionMode': (m) =>
    ['REDIRECT', 'TPROXY', 'NONE'].includes(m) ? undefined : `interceptionMode invalid, use REDIRECT,TPROXY,NONE: ${m}`,
  'status.sidecar.mesh.io/port': (p) => {
    const e = parsePort(p);
    return e ? `excludeInboundPorts invalid: ${e}` : undefined;
  },
  'readiness.status.sidecar.mesh.io/initialDelaySeconds': uint32,
  'readiness.status.sidecar.mesh.io/periodSeconds': uint32,
  'readiness.status.sidecar.mesh.io/failureThreshold': uint32,
  'traffic.sidecar.mesh.io/includeOutboundIPRanges': (r) => {
    if (r === '*') return undefined;
    const e = cidrList(r);
    return e ? `includeIPRanges invalid: ${e}` : undefined;
  },
  'traffic.sidecar.mesh.io/excludeOutboundIPRanges': (r) => {
    const e = cidrList(r);
    return e ? `excludeIPRanges invalid: ${e}` : undefined;
  },
  'traffic.sidecar.mesh.io/includeInboundPorts': (p) => (p === '*' ? undefined : portList('includeInboundPorts')(p)),
  'traffic.sidecar.mesh.io/excludeInboundPorts': portList('excludeInboundPorts'),
  'traffic.sidecar.mesh.io/excludeOutboundPorts': portList('excludeOutboundPorts'),
  'prometheus.mesh.io/merge-metrics': bool,
  'proxy.mesh.io/config': (text) => {
    try {
      const pc = applyProxyConfigText(defaultProxyConfig(), text, 'proxy.mesh.io/config');
      const errs = validateProxyConfig(pc);
      return errs.length ? errs.join('; ') : undefined;
    } catch (e) {
      if (e instanceof MeshConfigError) return `failed to convert to apply proxy config: ${e.message}`;
      throw e;
    }
  },
};

/** Errors for the pod's annotations, each `invalid value '…' for annotation '…': …`, in key order. */
export function validateAnnotations(annotations: Record<string, string>): string[] {
  const errs: string[] = [];
  for (const name of Object.keys(annotations).sort()) {
    const check = CHECKS[name];
    if (!check) continue;
    const e = check(annotations[name]!);
    if (e) errs.push(`invalid value '${annotations[name]}' for annotation '${name}': ${e}`);
  }
  return errs;
}

export const ANNOTATION_CHECKS = CHECKS;
