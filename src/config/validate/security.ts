// RequestAuthentication, AuthorizationPolicy, PeerAuthentication (Istio's security validation).
import { goBool } from '../../lib/gostrconv';
import { createPublicKey, createSecretKey } from 'node:crypto';
import type { Config, JWTRule, PolicyTargetReference, WorkloadSelector } from '../types';
import { isObject } from '../values';
import { checkDuration, checkWorkloadSelector, httpHeaderNameError } from './common';
import { isValidCIDR, isValidIP } from './names';
import { at, dot, key, type Report } from './report';

interface SelectorAndRefs {
  selector?: WorkloadSelector;
  targetRef?: PolicyTargetReference;
  targetRefs?: PolicyTargetReference[];
}

// Group/Kind pairs a policy may target (the version is not checked). Our networking group is
// accepted beside Istio's for ServiceEntry.
const ALLOWED_TARGET_REFS = [
  { group: 'core', kind: 'Service' },
  { group: 'networking.istio.io', kind: 'ServiceEntry' },
  { group: 'networking.mesh.io', kind: 'ServiceEntry' },
  { group: 'gateway.networking.k8s.io', kind: 'Gateway' },
];
const ALLOWED_TARGET_REFS_TEXT =
  '[core/v1/Service networking.istio.io/v1/ServiceEntry networking.mesh.io/v1/ServiceEntry gateway.networking.k8s.io/v1/Gateway]';

export function checkTargetRef(ref: PolicyTargetReference | undefined, path: string, r: Report): void {
  if (!ref) return;
  if (!ref.name) r.error(dot(path, 'name'), 'targetRef name must be set');
  if (ref.namespace) r.error(dot(path, 'namespace'), 'targetRef namespace must not be set; cross namespace referencing is not supported');
  const group = ref.group || 'core';
  if (!ALLOWED_TARGET_REFS.some((a) => a.kind === ref.kind && a.group === group))
    r.error(path, `targetRef must be to one of ${ALLOWED_TARGET_REFS_TEXT} but was ${ref.group ?? ''}/${ref.kind ?? ''}`);
}

export function checkSelectorAndRefs(s: SelectorAndRefs, r: Report): void {
  const set = (s.selector ? 1 : 0) + (s.targetRef ? 1 : 0) + ((s.targetRefs ?? []).length > 0 ? 1 : 0);
  if (set > 1) r.error('spec', 'only one of targetRefs or workloadSelector can be set');
  checkWorkloadSelector(s.selector, 'spec.selector', r);
  checkTargetRef(s.targetRef, 'spec.targetRef', r);
  (s.targetRefs ?? []).forEach((ref, i) => checkTargetRef(ref, at('spec.targetRefs', i), r));
}

// --- RequestAuthentication

/** security.ParseJwksURI: an http or https URL. */
export function jwksUriError(uri: string): string | undefined {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(uri)?.[1]?.toLowerCase() ?? '';
  if (scheme !== 'http' && scheme !== 'https') return `URI scheme ${JSON.stringify(scheme)} is not supported`;
  try {
    const u = new URL(uri);
    if (u.hostname === '') return `parse ${JSON.stringify(uri)}: missing host`;
  } catch {
    return `parse ${JSON.stringify(uri)}: invalid URI`;
  }
  return undefined;
}

/** A JSON Web Key Set (or a single key) whose keys the runtime can import. */
export function jwksError(jwks: string): string | undefined {
  let v: unknown;
  try {
    v = JSON.parse(jwks);
  } catch (e) {
    return (e as Error).message;
  }
  if (!isObject(v)) return 'a JWKS must be a JSON object';
  const keys: unknown[] = 'keys' in v ? (Array.isArray(v.keys) ? v.keys : []) : [v];
  if ('keys' in v && !Array.isArray(v.keys)) return '"keys" must be an array';
  for (const [i, k] of keys.entries()) {
    if (!isObject(k) || typeof k.kty !== 'string') return `key ${i}: missing "kty"`;
    try {
      if (k.kty === 'oct') {
        if (typeof k.k !== 'string') return `key ${i}: missing "k"`;
        createSecretKey(Buffer.from(k.k, 'base64url'));
      } else {
        createPublicKey({ key: k as never, format: 'jwk' });
      }
    } catch (e) {
      return `key ${i}: ${(e as Error).message}`;
    }
  }
  return undefined;
}

function checkJwtRule(rule: JWTRule, path: string, r: Report): void {
  if (!rule.issuer) r.error(dot(path, 'issuer'), 'issuer must be set');
  (rule.audiences ?? []).forEach((a, i) => {
    if (a === '') r.error(at(dot(path, 'audiences'), i), 'audience must be non-empty string');
  });
  if (rule.jwksUri) r.error(dot(path, 'jwksUri'), jwksUriError(rule.jwksUri));
  if (rule.jwks) {
    const e = jwksError(rule.jwks);
    if (e) r.error(dot(path, 'jwks'), `jwks parse error: ${e}`);
  }
  // Istio accepts both and uses jwks; say so, since the URI is then silently unused.
  if (rule.jwks && rule.jwksUri) r.warn(dot(path, 'jwks'), 'only one of jwks and jwksUri should be set; jwks is used and jwksUri ignored');
  (rule.fromHeaders ?? []).forEach((h, i) => {
    if (!h.name) r.error(at(dot(path, 'fromHeaders'), i), 'location header name must be non-empty string');
  });
  (rule.fromParams ?? []).forEach((q, i) => {
    if (q === '') r.error(at(dot(path, 'fromParams'), i), 'location query must be non-empty string');
  });
  (rule.fromCookies ?? []).forEach((c, i) => {
    if (c === '') r.error(at(dot(path, 'fromCookies'), i), 'cookie name must be non-empty string');
  });
  (rule.outputClaimToHeaders ?? []).forEach((o, i) => {
    const p = at(dot(path, 'outputClaimToHeaders'), i);
    if (!o.claim || !o.header) {
      r.error(p, 'outputClaimToHeaders header and claim value must be non-empty string');
      return;
    }
    r.error(dot(p, 'header'), httpHeaderNameError(o.header));
  });
  checkDuration(rule.timeout, dot(path, 'timeout'), r);
}

export function validateRequestAuthentication(c: Config<'RequestAuthentication'>, r: Report): void {
  checkSelectorAndRefs(c.spec, r);
  (c.spec.jwtRules ?? []).forEach((rule, i) => checkJwtRule(rule, at('spec.jwtRules', i), r));
}

// --- AuthorizationPolicy

const ATTR_PREFIX_MAPKEY = ['request.headers', 'request.experimental.inline.headers', 'request.auth.claims', 'experimental.envoy.filters.'];

function mapKeyError(k: string): string | undefined {
  const open = k.indexOf('[');
  if (k.endsWith(']') && open > 0 && open < k.length - 2) return undefined;
  return `bad key (${k}): should have format a[b]`;
}

function ipsError(values: readonly string[]): string | undefined {
  const errs: string[] = [];
  for (const v of values) {
    if (v.includes('/')) {
      if (!isValidCIDR(v)) errs.push(`bad CIDR range (${v}): netip.ParsePrefix(${JSON.stringify(v)}): invalid prefix`);
    } else if (!isValidIP(v) || v.includes('%')) errs.push(`bad IP address (${v})`);
  }
  return errs.length ? errs.join('; ') : undefined;
}

function portsError(values: readonly string[]): string | undefined {
  const errs: string[] = [];
  for (const p of values) {
    if (!/^[0-9]+$/.test(p)) errs.push(`bad port (${p}): strconv.ParseUint: parsing ${JSON.stringify(p)}: invalid syntax`);
    else if (Number(p) > 4294967295) errs.push(`bad port (${p}): strconv.ParseUint: parsing ${JSON.stringify(p)}: value out of range`);
    else if (Number(p) > 65535) errs.push(`bad port (${p}): <nil>`);
  }
  return errs.length ? errs.join('; ') : undefined;
}

function emptyValuesError(name: string, values: readonly string[] | undefined): string | undefined {
  return (values ?? []).some((v) => v === '') ? `empty value not allowed, found in ${name}` : undefined;
}

function serviceAccountError(name: string, values: readonly string[] | undefined): string | undefined {
  const vs = values ?? [];
  if (vs.length > 16) return 'may not have more than 16 values';
  for (const v of vs) {
    if (v === '') return `empty value not allowed, found in ${name}`;
    if (v.includes('*')) return `wildcard not allowed, found in ${name}`;
    const slashes = (v.match(/\//g) ?? []).length;
    if (slashes > 1) return `expected format 'serviceAccount' or 'namespace/serviceAccount', found ${JSON.stringify(v)} in ${name}`;
    if (v.length > 320) return `value cannot exceed 320 characters, found ${JSON.stringify(v)} in ${name}`;
    if (slashes === 1) {
      const [ns, sa] = v.split('/') as [string, string];
      if (ns === '') return `expected format 'serviceAccount' or 'namespace/serviceAccount', found empty namespace ${JSON.stringify(v)} in ${name}`;
      if (sa === '')
        return `expected format 'serviceAccount' or 'namespace/serviceAccount', found empty serviceAccount ${JSON.stringify(v)} in ${name}`;
    }
  }
  return undefined;
}

/** security.ValidateAttribute: the `when` condition keys Istio supports, and their values. */
export function attributeError(k: string, values: readonly string[]): string | undefined {
  const empty = emptyValuesError(k, values);
  if (empty) return empty;
  if (ATTR_PREFIX_MAPKEY.some((p) => k.startsWith(p))) return mapKeyError(k);
  switch (k) {
    case 'source.ip':
    case 'remote.ip':
    case 'destination.ip':
      return ipsError(values);
    case 'destination.port':
      return portsError(values);
    case 'source.serviceAccount':
      return serviceAccountError(k, values);
    case 'source.namespace':
    case 'source.principal':
    case 'request.auth.principal':
    case 'request.auth.audiences':
    case 'request.auth.presenter':
    case 'connection.sni':
      return undefined;
    case 'destination.namespace':
      return `attribute ${k} is replaced by the metadata.namespace`;
    case 'destination.name':
    case 'destination.user':
      return `deprecated attribute ${k}: only supported in v1alpha1`;
  }
  if (k.startsWith('destination.labels')) return `attribute ${k} is replaced by the workload selector`;
  return `unknown attribute: ${k}`;
}

// The mark for validation-only (dry-run) AuthorizationPolicies: Istio's name and ours.
export const DRY_RUN_ANNOTATIONS = ['mesh.io/dry-run', 'istio.io/dry-run'];

/** The dry-run annotation is only for ALLOW/DENY AuthorizationPolicies, with a boolean value. */
export function checkDryRunAnnotation(c: Config, r: Report): void {
  for (const name of DRY_RUN_ANNOTATIONS) {
    const val = c.meta.annotations[name];
    if (val === undefined) continue;
    const field = `metadata.annotations[${name}]`;
    if (c.kind !== 'AuthorizationPolicy') {
      r.error(field, `${c.meta.namespace}/${c.meta.name} has unsupported annotation ${name}, please remove the annotation`);
      continue;
    }
    const action = (c as Config<'AuthorizationPolicy'>).spec.action ?? 'ALLOW';
    if (action === 'ALLOW' || action === 'DENY') {
      if (goBool(val) === undefined)
        r.error(
          field,
          `${c.meta.namespace}/${c.meta.name} has annotation ${name} with invalid value (${val}): strconv.ParseBool: parsing ${JSON.stringify(val)}: invalid syntax`,
        );
    } else {
      r.error(
        field,
        `the annotation ${name} currently only supports action ALLOW/DENY, found action ${action} in ${c.meta.namespace}/${c.meta.name}`,
      );
    }
  }
}

type Source = NonNullable<NonNullable<NonNullable<Config<'AuthorizationPolicy'>['spec']['rules']>[number]['from']>[number]['source']> & {
  serviceAccounts?: string[];
  notServiceAccounts?: string[];
};

export function validateAuthorizationPolicy(c: Config<'AuthorizationPolicy'>, r: Report): void {
  const ap = c.spec;
  const action = ap.action ?? 'ALLOW';
  const rules = ap.rules ?? [];
  checkSelectorAndRefs(ap, r);

  if (action === 'CUSTOM') {
    if (rules.length === 0)
      r.error(
        'spec.rules',
        'CUSTOM action without `rules` is meaningless as it will never be triggered, add an empty rule `{}` if you want it be triggered for every request',
      );
    else if (!ap.provider?.name) r.error('spec.provider.name', '`provider.name` must not be empty');
    rules.forEach((rule, i) => {
      const rp = at('spec.rules', i);
      (rule.from ?? []).forEach((f, j) => {
        const src = f.source;
        if (!src) return;
        const sp = dot(at(dot(rp, 'from'), j), 'source');
        for (const [field, name] of [
          ['namespaces', 'From.Namespaces'],
          ['notNamespaces', 'From.NotNamespaces'],
          ['principals', 'From.Principals'],
          ['notPrincipals', 'From.NotPrincipals'],
          ['requestPrincipals', 'From.RequestPrincipals'],
          ['notRequestPrincipals', 'From.NotRequestPrincipals'],
        ] as const) {
          if ((src[field] ?? []).length !== 0) r.error(dot(sp, field), `${name} is currently not supported with CUSTOM action`);
        }
      });
      (rule.when ?? []).forEach((w, j) => {
        const k = w.key ?? '';
        if (k === 'source.namespace' || k === 'source.principal' || k.startsWith('request.auth.'))
          r.error(dot(at(dot(rp, 'when'), j), 'key'), `${k} is currently not supported with CUSTOM action`);
      });
    });
  }
  if (ap.provider && action !== 'CUSTOM') r.error('spec.provider', `\`provider\` must not be with non CUSTOM action, found ${action}`);
  if (action === 'DENY' && rules.length === 0)
    r.error(
      'spec.rules',
      'DENY action without `rules` is meaningless as it will never be triggered, add an empty rule `{}` if you want it be triggered for every request',
    );

  rules.forEach((rule, i) => {
    const rp = at('spec.rules', i);
    let tcpInFrom = false;
    let tcpInTo = false;
    let fromExists = false;
    let toExists = false;
    (rule.from ?? []).forEach((f, j) => {
      const fp = at(dot(rp, 'from'), j);
      if (!f.source) {
        r.error(dot(fp, 'source'), `\`from.source\` must not be nil, found at rule ${i}`);
        return;
      }
      fromExists = true;
      const src = f.source as Source;
      const sp = dot(fp, 'source');
      const lists = [
        'principals',
        'requestPrincipals',
        'namespaces',
        'serviceAccounts',
        'ipBlocks',
        'remoteIpBlocks',
        'notPrincipals',
        'notRequestPrincipals',
        'notNamespaces',
        'notServiceAccounts',
        'notIpBlocks',
        'notRemoteIpBlocks',
      ] as const;
      if (lists.every((l) => (src[l] ?? []).length === 0)) r.error(sp, `\`from.source\` must not be empty, found at rule ${i}`);
      for (const l of ['ipBlocks', 'notIpBlocks', 'remoteIpBlocks', 'notRemoteIpBlocks'] as const) r.error(dot(sp, l), ipsError(src[l] ?? []));
      for (const l of lists) {
        const name = l[0]!.toUpperCase() + l.slice(1);
        r.error(
          dot(sp, l),
          l === 'serviceAccounts' || l === 'notServiceAccounts' ? serviceAccountError(name, src[l]) : emptyValuesError(name, src[l]),
        );
      }
      // Anything but request principals applies to TCP traffic too.
      if (
        ['principals', 'notPrincipals', 'ipBlocks', 'notIpBlocks', 'namespaces', 'notNamespaces', 'remoteIpBlocks', 'notRemoteIpBlocks'].some(
          (l) => src[l as keyof Source] !== undefined,
        )
      )
        tcpInFrom = true;
    });
    (rule.to ?? []).forEach((t, j) => {
      const tp = at(dot(rp, 'to'), j);
      if (!t.operation) {
        r.error(dot(tp, 'operation'), `\`to.operation\` must not be nil, found at rule ${i}`);
        return;
      }
      toExists = true;
      const op = t.operation;
      const opp = dot(tp, 'operation');
      const lists = ['ports', 'methods', 'paths', 'hosts', 'notPorts', 'notMethods', 'notPaths', 'notHosts'] as const;
      if (lists.every((l) => (op[l] ?? []).length === 0)) r.error(opp, `\`to.operation\` must not be empty, found at rule ${i}`);
      r.error(dot(opp, 'ports'), portsError(op.ports ?? []));
      r.error(dot(opp, 'notPorts'), portsError(op.notPorts ?? []));
      for (const l of lists) r.error(dot(opp, l), emptyValuesError(l[0]!.toUpperCase() + l.slice(1), op[l]));
      r.error(dot(opp, 'paths'), pathTemplateError('Paths', op.paths ?? []));
      r.error(dot(opp, 'notPaths'), pathTemplateError('NotPaths', op.notPaths ?? []));
      if (op.ports !== undefined || op.notPorts !== undefined) tcpInTo = true;
    });
    (rule.when ?? []).forEach((w, j) => {
      const wp = at(dot(rp, 'when'), j);
      const k = w.key ?? '';
      if (k === '') {
        r.error(dot(wp, 'key'), '`key` must not be empty');
        return;
      }
      if ((w.values ?? []).length === 0 && (w.notValues ?? []).length === 0) {
        r.error(wp, `at least one of \`values\` or \`notValues\` must be set for key ${k}`);
        return;
      }
      const ve = attributeError(k, w.values ?? []);
      if (ve) r.error(dot(wp, 'values'), `invalid \`value\` for \`key\` ${k}: ${ve}`);
      const ne = attributeError(k, w.notValues ?? []);
      if (ne) r.error(dot(wp, 'notValues'), `invalid \`notValue\` for \`key\` ${k}: ${ne}`);
    });
    if (((fromExists && !toExists && !tcpInFrom) || (toExists && !tcpInTo)) && action === 'DENY')
      r.warn(
        rp,
        'configured AuthorizationPolicy will deny all traffic to TCP ports under its scope due to the use of only HTTP attributes in a DENY rule; it is recommended to explicitly specify the port',
      );
  });
}

const MATCH_ONE = '{*}';
const MATCH_ANY = '{**}';
const validLiteral = /^[a-zA-Z0-9-._~%!$&'()+,;:@=]+$/;

/** security.CheckValidPathTemplate: `{*}` and a final `{**}` segments only. */
function pathTemplateError(name: string, paths: readonly string[]): string | undefined {
  for (const raw of paths) {
    const isTemplate = raw.includes(MATCH_ONE) || raw.includes(MATCH_ANY);
    let anySeen = false;
    const path = raw.replace(/^\/+|\/+$/g, '');
    for (const glob of path.split('/')) {
      if (glob === MATCH_ONE && !anySeen) continue;
      if (glob === MATCH_ANY && !anySeen) {
        anySeen = true;
        continue;
      }
      if ((glob === MATCH_ANY || glob === MATCH_ONE) && anySeen)
        return `invalid or unsupported path ${path}, found in ${name}. {**} is not the last operator`;
      if (/[{}]/.test(glob)) return `invalid or unsupported path ${path}, found in ${name}. Contains '{' or '}' beyond a supported path template`;
      if (isTemplate && !validLiteral.test(glob))
        return `invalid or unsupported path ${path}, found in ${name}. Contains segment ${glob} with invalid string literal`;
    }
  }
  return undefined;
}

// --- PeerAuthentication

export function validatePeerAuthentication(c: Config<'PeerAuthentication'>, r: Report): void {
  const pa = c.spec;
  const ports = Object.keys(pa.portLevelMtls ?? {});
  const emptySelector = !pa.selector || Object.keys(pa.selector.matchLabels ?? {}).length === 0;
  // Port-level settings need a workload: mesh- and namespace-wide policies have no ports.
  if (emptySelector && ports.length !== 0) r.error('spec.portLevelMtls', 'mesh/namespace peer authentication cannot have port level mTLS');
  for (const p of ports) {
    const n = Number(p);
    if (!(n > 0 && n <= 65535)) r.error(key('spec.portLevelMtls', p), 'port must be in range 1..65535');
  }
  checkWorkloadSelector(pa.selector, 'spec.selector', r);
}
