// One AuthorizationPolicy rule → one Envoy RBAC policy (Istio pilot/pkg/security/authz/model): the
// `from`, `to` and `when` conditions are consolidated into principals (who) and permissions (what);
// conditions inside a from/to entry are ANDed, the entries are ORed, values of one field are ORed and
// not-values negated.
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { AuthorizationRule } from '../../config/types';
import type { PermissionSchema, PolicySchema, PrincipalSchema } from '../../gen/envoy/config/rbac/v3/rbac_pb';
import {
  exactMatcher,
  istioHeaderMatcher,
  istioHostMatcher,
  istioPathMatcher,
  istioStringMatcher,
  jwtClaimsListValueMatcher,
  jwtClaimStringMatcher,
  metadataValueMatcher,
  orValue,
  prefixMatcher,
  regexMatcher,
  stringOrValue,
  stringValue,
  suffixMatcher,
  type MetadataMatcherInit,
  type StringMatcherInit,
  type ValueMatcherInit,
} from '../matchers';

export type PermissionInit = MessageInitShape<typeof PermissionSchema>;
export type PrincipalInit = MessageInitShape<typeof PrincipalSchema>;
export type PolicyInit = MessageInitShape<typeof PolicySchema>;
export type RbacAction = 'ALLOW' | 'DENY' | 'AUDIT';

// Attribute names of `when` conditions (Istio model.go).
const ATTR_REQUEST_HEADER = 'request.headers';
const ATTR_REQUEST_INLINE_HEADER = 'request.experimental.inline.headers';
const ATTR_SRC_IP = 'source.ip';
const ATTR_REMOTE_IP = 'remote.ip';
const ATTR_SRC_NAMESPACE = 'source.namespace';
const ATTR_SRC_SERVICE_ACCOUNT = 'source.serviceAccount';
const ATTR_SRC_PRINCIPAL = 'source.principal';
const ATTR_REQUEST_PRINCIPAL = 'request.auth.principal';
const ATTR_REQUEST_AUDIENCES = 'request.auth.audiences';
const ATTR_REQUEST_PRESENTER = 'request.auth.presenter';
const ATTR_REQUEST_CLAIMS = 'request.auth.claims';
const ATTR_DEST_IP = 'destination.ip';
const ATTR_DEST_PORT = 'destination.port';
const ATTR_CONN_SNI = 'connection.sni';
const ATTR_ENVOY_FILTER = 'experimental.envoy.filters.';
const METHOD_HEADER = ':method';
const HOST_HEADER = ':authority';
const PATH_MATCHER = 'path-matcher';

const SPIFFE_PREFIX = 'spiffe://';

// ---- small constructors (Istio permission.go / principal.go) ----------------------------------------

export const permissionAny = (): PermissionInit => ({ rule: { case: 'any', value: true } });
export const permissionAnd = (rules: PermissionInit[]): PermissionInit => ({ rule: { case: 'andRules', value: { rules } } });
export const permissionOr = (rules: PermissionInit[]): PermissionInit => ({ rule: { case: 'orRules', value: { rules } } });
export const permissionNot = (p: PermissionInit): PermissionInit => ({ rule: { case: 'notRule', value: p } });
const permissionMetadata = (m: MetadataMatcherInit): PermissionInit => ({ rule: { case: 'metadata', value: m } });

export const principalAny = (): PrincipalInit => ({ identifier: { case: 'any', value: true } });
export const principalAnd = (ids: PrincipalInit[]): PrincipalInit => ({ identifier: { case: 'andIds', value: { ids } } });
export const principalOr = (ids: PrincipalInit[]): PrincipalInit => ({ identifier: { case: 'orIds', value: { ids } } });
export const principalNot = (p: PrincipalInit): PrincipalInit => ({ identifier: { case: 'notId', value: p } });
const principalMetadata = (m: MetadataMatcherInit): PrincipalInit => ({ identifier: { case: 'metadata', value: m } });
const principalAuthenticated = (m: StringMatcherInit): PrincipalInit => ({ identifier: { case: 'authenticated', value: { principalName: m } } });

// ---- value parsing -------------------------------------------------------------------------------

/** Istio util.AddrStrToCidrRange: an address is a /32 (IPv4) or /128 (IPv6) range, a CIDR as written. */
export function cidrRange(addr: string): { addressPrefix: string; prefixLen: number } {
  if (addr === '') throw new Error('empty address');
  const [ip, bits] = addr.includes('/') ? (addr.split('/', 2) as [string, string]) : [addr, undefined];
  const v4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/.test(ip);
  let address = ip;
  if (!v4) {
    let canonical: string | undefined;
    if (ip.includes(':')) {
      try {
        canonical = new URL(`http://[${ip}]/`).hostname.slice(1, -1);
      } catch {
        canonical = undefined;
      }
    }
    if (canonical === undefined) throw new Error(`ParseAddr(${JSON.stringify(ip)}): unable to parse IP`);
    address = canonical;
  }
  const max = v4 ? 32 : 128;
  if (bits === undefined) return { addressPrefix: address, prefixLen: max };
  const n = /^\d+$/.test(bits) ? Number(bits) : NaN;
  if (!(n >= 0 && n <= max)) throw new Error(`netip.ParsePrefix(${JSON.stringify(addr)}): bad bits after slash: ${JSON.stringify(bits)}`);
  return { addressPrefix: address, prefixLen: n };
}

/** Istio convertToPort. */
export function convertToPort(v: string): number {
  const n = /^\d+$/.test(v) ? Number(v) : NaN;
  if (!(n >= 0 && n <= 65535)) throw new Error(`invalid port ${v}`);
  return n;
}

function extractNameInBrackets(s: string): string {
  if (!s.startsWith('[') || !s.endsWith(']')) throw new Error(`expecting format [<NAME>], but found ${s}`);
  return s.slice(1, -1);
}

/** Istio extractNameInNestedBrackets: `[a][b]` → [a, b]; a single bracket pair may hold anything. */
export function extractNameInNestedBrackets(s: string): string[] {
  const claims: string[] = [];
  const endBracket = (begin: number): number => {
    if (begin >= s.length || s[begin] !== '[') return -1;
    for (let i = begin + 1; i < s.length; i++) {
      if (s[i] === '[') return -1;
      if (s[i] === ']') return i;
    }
    return -1;
  };
  for (let begin = 0; begin < s.length;) {
    const end = endBracket(begin);
    if (end === -1) return [extractNameInBrackets(s)];
    claims.push(s.slice(begin + 1, end));
    begin = end + 1;
  }
  return claims;
}

/** Istio serviceAccountRegex: `name` (policy namespace) or `ns/name`, as a SPIFFE identity regex. */
function serviceAccountRegex(defaultNamespace: string, value: string): string {
  const slash = value.indexOf('/');
  const [ns, sa] = slash >= 0 ? [value.slice(0, slash), value.slice(slash + 1)] : [defaultNamespace, value];
  return `spiffe://.+/ns/${ns}/(.+/|)sa/${sa}(/.+)?`;
}

const MATCH_ANY = regexMatcher('.+');

/** request principals `iss/sub` (issuer may contain `/`: the last one splits) as jwt_authn payload matches. */
function requestPrincipal(value: string): PrincipalInit {
  const idx = value.lastIndexOf('/');
  const found = idx >= 0;
  const [iss, sub] = found ? [value.slice(0, idx), value.slice(idx + 1)] : [value, ''];
  let matchIss: StringMatcherInit;
  let matchSub: StringMatcherInit;
  if (value === '*') {
    matchIss = MATCH_ANY;
    matchSub = MATCH_ANY;
  } else if (value.startsWith('*')) {
    if (found) {
      matchIss = iss === '*' ? MATCH_ANY : suffixMatcher(iss.slice(1));
      matchSub = exactMatcher(sub);
    } else {
      matchIss = MATCH_ANY;
      matchSub = suffixMatcher(value.slice(1));
    }
  } else if (value.endsWith('*')) {
    if (found) {
      matchIss = exactMatcher(iss);
      matchSub = sub === '*' ? MATCH_ANY : prefixMatcher(sub.slice(0, -1));
    } else {
      matchIss = prefixMatcher(value.slice(0, -1));
      matchSub = MATCH_ANY;
    }
  } else {
    matchSub = exactMatcher(sub);
    matchIss = exactMatcher(iss);
  }
  return principalAnd([principalMetadata(jwtClaimStringMatcher('iss', matchIss)), principalMetadata(jwtClaimStringMatcher('sub', matchSub))]);
}

// ---- generators (Istio generator.go) -------------------------------------------------------------

interface Generator {
  permission?(key: string, value: string): PermissionInit;
  principal?(key: string, value: string): PrincipalInit;
}

/** Generators that turn all values of a field into one matcher (the JWT ones, where lists are claims). */
interface ExtendedGenerator {
  extendedPermission?(key: string, values: readonly string[]): PermissionInit;
  extendedPrincipal?(key: string, values: readonly string[]): PrincipalInit;
}

const destIP: Generator = { permission: (_k, v) => ({ rule: { case: 'destinationIp', value: cidrRange(v) } }) };
const destPort: Generator = { permission: (_k, v) => ({ rule: { case: 'destinationPort', value: convertToPort(v) } }) };
const connSNI: Generator = { permission: (_k, v) => ({ rule: { case: 'requestedServerName', value: istioStringMatcher(v) } }) };

const envoyFilter: ExtendedGenerator = {
  extendedPermission(key, values) {
    // `experimental.envoy.filters.a.b[c]` → filter `envoy.filters.a.b`, key `c`.
    const body = key.slice('experimental.'.length).replace(/\]$/, '');
    const open = body.indexOf('[');
    if (open < 0) throw new Error(`invalid key: ${key}`);
    const [filter, mkey] = [body.slice(0, open), body.slice(open + 1)];
    const matchers: ValueMatcherInit[] = values.map((v) =>
      v.startsWith('[') && v.endsWith(']')
        ? {
            matchPattern: {
              case: 'listMatch',
              value: { matchPattern: { case: 'oneOf', value: stringValue(istioStringMatcher(v.replace(/^[[\]]+|[[\]]+$/g, ''))) } },
            },
          }
        : stringValue(istioStringMatcher(v)),
    );
    return permissionMetadata(metadataValueMatcher(filter, mkey, orValue(matchers)));
  },
};

const srcIP: Generator = { principal: (_k, v) => ({ identifier: { case: 'directRemoteIp', value: cidrRange(v) } }) };
const remoteIP: Generator = { principal: (_k, v) => ({ identifier: { case: 'remoteIp', value: cidrRange(v) } }) };
const srcNamespace: Generator = {
  principal: (_k, v) => principalAuthenticated(regexMatcher(`.*/ns/${v.replaceAll('*', '.*')}/.*`)),
};
const srcServiceAccount = (policyNamespace: string): Generator => ({
  principal: (_k, v) => principalAuthenticated(regexMatcher(serviceAccountRegex(policyNamespace, v))),
});
const srcPrincipal: Generator = { principal: (_k, v) => principalAuthenticated(istioStringMatcher(v, SPIFFE_PREFIX)) };

function httpOnly(key: string, forTCP: boolean): void {
  if (forTCP) throw new Error(`${JSON.stringify(key)} is HTTP only`);
}

const requestPrincipalGen = (forTCP: boolean): ExtendedGenerator => ({
  extendedPrincipal(key, values) {
    httpOnly(key, forTCP);
    const or = values.map(requestPrincipal);
    return or.length === 1 ? or[0]! : principalOr(or);
  },
});
const requestAudiences = (forTCP: boolean): ExtendedGenerator => ({
  extendedPrincipal(key, values) {
    httpOnly(key, forTCP);
    return principalMetadata(jwtClaimsListValueMatcher(['aud'], stringOrValue(values)));
  },
});
const requestPresenter = (forTCP: boolean): ExtendedGenerator => ({
  extendedPrincipal(key, values) {
    httpOnly(key, forTCP);
    return principalMetadata(jwtClaimsListValueMatcher(['azp'], stringOrValue(values)));
  },
});
const requestClaims = (forTCP: boolean): ExtendedGenerator => ({
  extendedPrincipal(key, values) {
    httpOnly(key, forTCP);
    const claims = extractNameInNestedBrackets(key.slice(ATTR_REQUEST_CLAIMS.length));
    return principalMetadata(jwtClaimsListValueMatcher(claims, stringOrValue(values)));
  },
});
const requestHeader = (forTCP: boolean): Generator => ({
  principal(key, v) {
    httpOnly(key, forTCP);
    return { identifier: { case: 'header', value: istioHeaderMatcher(extractNameInBrackets(key.slice(ATTR_REQUEST_HEADER.length)), v) } };
  },
});
/** Istio HeaderMatcherWithRegex: one value among the comma-joined values of a header. */
function inlineHeaderRegex(v: string): string {
  const quote = (s: string) => s.replace(/[\\.+*?()|[\]{}^$]/g, '\\$&');
  const r = v.startsWith('*') ? `.*${quote(v.slice(1))}` : v.endsWith('*') ? `${quote(v.slice(0, -1))}.*` : quote(v);
  return `^${r}$|^${r},.*|.*,${r},.*|.*,${r}$`;
}
const requestInlineHeader = (forTCP: boolean): Generator => ({
  principal(key, v) {
    httpOnly(key, forTCP);
    const name = extractNameInBrackets(key.slice(ATTR_REQUEST_INLINE_HEADER.length));
    if (v === '*') return { identifier: { case: 'header', value: { name, headerMatchSpecifier: { case: 'presentMatch', value: true } } } };
    return {
      identifier: { case: 'header', value: { name, headerMatchSpecifier: { case: 'safeRegexMatch', value: { regex: inlineHeaderRegex(v) } } } },
    };
  },
});
const host = (forTCP: boolean): Generator => ({
  permission(key, v) {
    httpOnly(key, forTCP);
    return { rule: { case: 'header', value: istioHostMatcher(HOST_HEADER, v) } };
  },
});
/** Istio security.ContainsPathTemplate: `{*}` / `{**}` operators. */
export function containsPathTemplate(p: string): boolean {
  return p.includes('{*}') || p.includes('{**}');
}
const path = (forTCP: boolean): Generator => ({
  permission(key, v) {
    httpOnly(key, forTCP);
    // Istio emits an envoy.path.match.uri_template matcher; this control plane has no such extension,
    // so the value is an error: an ALLOW rule with it is dropped, a DENY/AUDIT rule ignores it.
    if (containsPathTemplate(v)) throw new Error(`path template ${JSON.stringify(v)} is not supported`);
    return { rule: { case: 'urlPath', value: istioPathMatcher(v) } };
  },
});
const method = (forTCP: boolean): Generator => ({
  permission(key, v) {
    httpOnly(key, forTCP);
    return { rule: { case: 'header', value: istioHeaderMatcher(METHOD_HEADER, v) } };
  },
});

// ---- the model -----------------------------------------------------------------------------------

interface RuleItem {
  key: string;
  values: readonly string[];
  notValues: readonly string[];
  g?: Generator;
  extended?: ExtendedGenerator;
}

type RuleList = RuleItem[];

function nonEmpty(values: readonly string[] | undefined, notValues: readonly string[] | undefined): boolean {
  return (values?.length ?? 0) > 0 || (notValues?.length ?? 0) > 0;
}

/** A rule's conditions, consolidated per from/to entry (Istio Model). */
export interface Model {
  permissions: RuleList[];
  principals: RuleList[];
}

type Source = NonNullable<NonNullable<AuthorizationRule['from']>[number]['source']> & { serviceAccounts?: string[]; notServiceAccounts?: string[] };

/** Istio model.New; throws for an unknown `when` attribute. `forTCP` makes HTTP-only attributes errors. */
export function newModel(policyNamespace: string, r: AuthorizationRule, forTCP = false): Model {
  const basePermission: RuleList = [];
  const basePrincipal: RuleList = [];
  const last = (list: RuleList, key: string, values?: string[], notValues?: string[], g?: Generator, extended?: ExtendedGenerator) => {
    if (nonEmpty(values, notValues))
      list.push({ key, values: values ?? [], notValues: notValues ?? [], ...(g ? { g } : {}), ...(extended ? { extended } : {}) });
  };
  for (const w of r.when ?? []) {
    const k = w.key;
    if (k === ATTR_DEST_IP) last(basePermission, k, w.values, w.notValues, destIP);
    else if (k === ATTR_DEST_PORT) last(basePermission, k, w.values, w.notValues, destPort);
    else if (k === ATTR_CONN_SNI) last(basePermission, k, w.values, w.notValues, connSNI);
    else if (k.startsWith(ATTR_ENVOY_FILTER)) last(basePermission, k, w.values, w.notValues, undefined, envoyFilter);
    else if (k === ATTR_SRC_IP) last(basePrincipal, k, w.values, w.notValues, srcIP);
    else if (k === ATTR_REMOTE_IP) last(basePrincipal, k, w.values, w.notValues, remoteIP);
    else if (k === ATTR_SRC_NAMESPACE) last(basePrincipal, k, w.values, w.notValues, srcNamespace);
    else if (k === ATTR_SRC_SERVICE_ACCOUNT) last(basePrincipal, k, w.values, w.notValues, srcServiceAccount(policyNamespace));
    else if (k === ATTR_SRC_PRINCIPAL) last(basePrincipal, k, w.values, w.notValues, srcPrincipal);
    else if (k === ATTR_REQUEST_PRINCIPAL) last(basePrincipal, k, w.values, w.notValues, undefined, requestPrincipalGen(forTCP));
    else if (k === ATTR_REQUEST_AUDIENCES) last(basePrincipal, k, w.values, w.notValues, undefined, requestAudiences(forTCP));
    else if (k === ATTR_REQUEST_PRESENTER) last(basePrincipal, k, w.values, w.notValues, undefined, requestPresenter(forTCP));
    else if (k.startsWith(ATTR_REQUEST_HEADER)) last(basePrincipal, k, w.values, w.notValues, requestHeader(forTCP));
    else if (k.startsWith(ATTR_REQUEST_INLINE_HEADER)) last(basePrincipal, k, w.values, w.notValues, requestInlineHeader(forTCP));
    else if (k.startsWith(ATTR_REQUEST_CLAIMS)) last(basePrincipal, k, w.values, w.notValues, undefined, requestClaims(forTCP));
    else throw new Error(`unknown attribute ${k}`);
  }

  const front = (list: RuleList, key: string, values?: string[], notValues?: string[], g?: Generator, extended?: ExtendedGenerator) => {
    if (nonEmpty(values, notValues))
      list.unshift({ key, values: values ?? [], notValues: notValues ?? [], ...(g ? { g } : {}), ...(extended ? { extended } : {}) });
  };
  const principals: RuleList[] = [];
  for (const f of r.from ?? []) {
    const merged = [...basePrincipal];
    const s = f.source as Source | undefined;
    if (s) {
      // Each insertion goes to the front, so the final order is principals, request principals,
      // service accounts, namespaces, remote IPs, IPs, then the `when` conditions.
      front(merged, ATTR_SRC_IP, s.ipBlocks, s.notIpBlocks, srcIP);
      front(merged, ATTR_REMOTE_IP, s.remoteIpBlocks, s.notRemoteIpBlocks, remoteIP);
      front(merged, ATTR_SRC_NAMESPACE, s.namespaces, s.notNamespaces, srcNamespace);
      front(merged, ATTR_SRC_SERVICE_ACCOUNT, s.serviceAccounts, s.notServiceAccounts, srcServiceAccount(policyNamespace));
      front(merged, ATTR_REQUEST_PRINCIPAL, s.requestPrincipals, s.notRequestPrincipals, undefined, requestPrincipalGen(forTCP));
      front(merged, ATTR_SRC_PRINCIPAL, s.principals, s.notPrincipals, srcPrincipal);
    }
    principals.push(merged);
  }
  if ((r.from ?? []).length === 0) principals.push(basePrincipal);

  const permissions: RuleList[] = [];
  for (const t of r.to ?? []) {
    const merged = [...basePermission];
    const o = t.operation;
    if (o) {
      front(merged, ATTR_DEST_PORT, o.ports, o.notPorts, destPort);
      front(merged, PATH_MATCHER, o.paths, o.notPaths, path(forTCP));
      front(merged, METHOD_HEADER, o.methods, o.notMethods, method(forTCP));
      front(merged, HOST_HEADER, o.hosts, o.notHosts, host(forTCP));
    }
    permissions.push(merged);
  }
  if ((r.to ?? []).length === 0) permissions.push(basePermission);
  return { permissions, principals };
}

/**
 * Istio rule.checkError: in an ALLOW policy a bad value drops the whole rule (a smaller allow); in DENY
 * and AUDIT it drops only that value (a wider deny or audit).
 */
function attempt<T>(action: RbacAction, f: () => T): T | undefined {
  try {
    return f();
  } catch (e) {
    if (action === 'ALLOW') throw e;
    return undefined;
  }
}

function unimplemented(): never {
  throw new Error('unimplemented');
}

function itemPermissions(r: RuleItem, action: RbacAction): PermissionInit[] {
  const out: PermissionInit[] = [];
  if (r.extended) {
    const ext = r.extended.extendedPermission ?? unimplemented;
    if (r.values.length > 0) {
      const p = attempt(action, () => ext(r.key, r.values));
      if (p) out.push(p);
    }
    if (r.notValues.length > 0) {
      const p = attempt(action, () => ext(r.key, r.notValues));
      if (p) out.push(permissionNot(p));
    }
    return out;
  }
  const gen = r.g?.permission ?? unimplemented;
  const each = (vs: readonly string[]) => vs.map((v) => attempt(action, () => gen(r.key, v))).filter((p): p is PermissionInit => p !== undefined);
  const or = each(r.values);
  if (or.length > 0) out.push(permissionOr(or));
  const notOr = each(r.notValues);
  if (notOr.length > 0) out.push(permissionNot(permissionOr(notOr)));
  return out;
}

function itemPrincipals(r: RuleItem, action: RbacAction): PrincipalInit[] {
  const out: PrincipalInit[] = [];
  if (r.extended) {
    const ext = r.extended.extendedPrincipal ?? unimplemented;
    if (r.values.length > 0) {
      const p = attempt(action, () => ext(r.key, r.values));
      if (p) out.push(p);
    }
    if (r.notValues.length > 0) {
      const p = attempt(action, () => ext(r.key, r.notValues));
      if (p) out.push(principalNot(p));
    }
    return out;
  }
  const gen = r.g?.principal ?? unimplemented;
  const each = (vs: readonly string[]) => vs.map((v) => attempt(action, () => gen(r.key, v))).filter((p): p is PrincipalInit => p !== undefined);
  const or = each(r.values);
  if (or.length > 0) out.push(principalOr(or));
  const notOr = each(r.notValues);
  if (notOr.length > 0) out.push(principalNot(principalOr(notOr)));
  return out;
}

/** Istio Model.Generate: the RBAC policy of the rule; throws when an ALLOW rule has an unusable value. */
export function generatePolicy(m: Model, action: RbacAction): PolicyInit {
  const permissions = m.permissions.map((rl) => {
    const and = rl.flatMap((r) => itemPermissions(r, action));
    return permissionAnd(and.length > 0 ? and : [permissionAny()]);
  });
  if (permissions.length === 0) throw new Error('must have at least 1 permission');
  const principals = m.principals.map((rl) => {
    const and = rl.flatMap((r) => itemPrincipals(r, action));
    return principalAnd(and.length > 0 ? and : [principalAny()]);
  });
  if (principals.length === 0) throw new Error('must have at least 1 principal');
  return { permissions, principals };
}
