// Envoy's RBAC engine (envoy.config.rbac.v3): a policy matches when one of its permissions and one of
// its principals match; ALLOW admits only matching requests, DENY refuses them, LOG admits everything
// and only reports. Used by the HTTP rbac filter and the network rbac filter (no HTTP attributes there:
// header and path rules never match on TCP).
import type { RBAC, Permission, Principal, Policy } from '../../gen/envoy/config/rbac/v3/rbac_pb';
import { RBAC_Action } from '../../gen/envoy/config/rbac/v3/rbac_pb';
import { compileMetadataMatcher, compileStringMatcher, type DynamicMetadata } from '../matchers/string';
import { ConfigError } from '../common/config-error';
import { cidrContains, parseCidr, parseIp } from '../common/cidr';
import { compileHeaderMatcher, type HeaderFields } from '../route/match';
import type { DownstreamConnectionInfo } from '../stream-info';

export interface RbacInput {
  /** undefined for network (TCP) RBAC. */
  headers: HeaderFields | undefined;
  /** Path without query string; undefined on TCP. */
  path: string | undefined;
  connection: DownstreamConnectionInfo;
  dynamicMetadata: DynamicMetadata | undefined;
}

type Pred = (r: RbacInput) => boolean;

function compilePermission(p: Permission, where: string): Pred {
  const r = p.rule;
  switch (r.case) {
    case 'andRules': {
      const fs = r.value.rules.map((x, i) => compilePermission(x, `${where}.and_rules.rules[${i}]`));
      return (q) => fs.every((f) => f(q));
    }
    case 'orRules': {
      const fs = r.value.rules.map((x, i) => compilePermission(x, `${where}.or_rules.rules[${i}]`));
      return (q) => fs.some((f) => f(q));
    }
    case 'any':
      return () => r.value;
    case 'header': {
      const m = compileHeaderMatcher(r.value, `${where}.header`);
      return (q) => (q.headers ? m(q.headers) : false);
    }
    case 'urlPath': {
      const pm = r.value.rule;
      if (pm.case !== 'path') throw new ConfigError(`${where}.url_path: a path matcher is required`);
      const m = compileStringMatcher(pm.value, `${where}.url_path.path`);
      return (q) => q.path !== undefined && m(q.path);
    }
    case 'destinationIp': {
      const c = parseCidr(r.value, `${where}.destination_ip`);
      return (q) => cidrContains(c, parseIp(q.connection.originalDestination?.address ?? q.connection.localAddress));
    }
    case 'destinationPort': {
      const port = r.value;
      return (q) => (q.connection.originalDestination?.port ?? q.connection.localPort) === port;
    }
    case 'destinationPortRange': {
      const { start, end } = r.value;
      return (q) => {
        const p = q.connection.originalDestination?.port ?? q.connection.localPort;
        return p >= start && p < end;
      };
    }
    case 'metadata': {
      const m = compileMetadataMatcher(r.value, `${where}.metadata`);
      return (q) => m(q.dynamicMetadata);
    }
    case 'notRule': {
      const f = compilePermission(r.value, `${where}.not_rule`);
      return (q) => !f(q);
    }
    case 'requestedServerName': {
      const m = compileStringMatcher(r.value, `${where}.requested_server_name`);
      return (q) => m(q.connection.serverName);
    }
    default:
      throw new ConfigError(`${where}: permission rule '${r.case ?? 'none'}' is not supported`);
  }
}

function compilePrincipal(p: Principal, where: string): Pred {
  const id = p.identifier;
  switch (id.case) {
    case 'andIds': {
      const fs = id.value.ids.map((x, i) => compilePrincipal(x, `${where}.and_ids.ids[${i}]`));
      return (q) => fs.every((f) => f(q));
    }
    case 'orIds': {
      const fs = id.value.ids.map((x, i) => compilePrincipal(x, `${where}.or_ids.ids[${i}]`));
      return (q) => fs.some((f) => f(q));
    }
    case 'any':
      return () => id.value;
    case 'authenticated': {
      // Envoy AuthenticatedMatcher: any TLS connection matches an empty principal_name; otherwise any
      // URI SAN, then any DNS SAN, then the RFC 2253 subject of the peer certificate.
      const pn = id.value.principalName;
      if (!pn) return (q) => q.connection.tls;
      const m = compileStringMatcher(pn, `${where}.authenticated.principal_name`);
      return (q) => {
        const c = q.connection;
        if (!c.tls) return false;
        return c.peerUriSans.some(m) || c.peerDnsSans.some(m) || m(c.peerSubject);
      };
    }
    case 'sourceIp':
    case 'directRemoteIp':
    case 'remoteIp': {
      const c = parseCidr(id.value, `${where}.${id.case}`);
      return (q) => cidrContains(c, parseIp(q.connection.remoteAddress));
    }
    case 'header': {
      const m = compileHeaderMatcher(id.value, `${where}.header`);
      return (q) => (q.headers ? m(q.headers) : false);
    }
    case 'urlPath': {
      const pm = id.value.rule;
      if (pm.case !== 'path') throw new ConfigError(`${where}.url_path: a path matcher is required`);
      const m = compileStringMatcher(pm.value, `${where}.url_path.path`);
      return (q) => q.path !== undefined && m(q.path);
    }
    case 'metadata': {
      const m = compileMetadataMatcher(id.value, `${where}.metadata`);
      return (q) => m(q.dynamicMetadata);
    }
    case 'notId': {
      const f = compilePrincipal(id.value, `${where}.not_id`);
      return (q) => !f(q);
    }
    default:
      throw new ConfigError(`${where}: principal '${id.case ?? 'none'}' is not supported`);
  }
}

interface CompiledPolicy {
  name: string;
  matches: Pred;
}

function compilePolicy(name: string, p: Policy, where: string): CompiledPolicy {
  if (p.condition || p.checkedCondition) throw new ConfigError(`${where}.condition: CEL conditions are not supported`);
  if (p.permissions.length === 0) throw new ConfigError(`${where}.permissions: at least one permission is required`);
  if (p.principals.length === 0) throw new ConfigError(`${where}.principals: at least one principal is required`);
  const perms = p.permissions.map((x, i) => compilePermission(x, `${where}.permissions[${i}]`));
  const princ = p.principals.map((x, i) => compilePrincipal(x, `${where}.principals[${i}]`));
  return { name, matches: (q) => perms.some((f) => f(q)) && princ.some((f) => f(q)) };
}

export type RbacAction = 'ALLOW' | 'DENY' | 'LOG';

export interface RbacDecision {
  allowed: boolean;
  /** Name of the first matching policy (Envoy's effective policy id), '' when none. */
  policy: string;
}

export class RbacEngine {
  readonly action: RbacAction;
  private readonly policies: CompiledPolicy[];

  constructor(rbac: RBAC, where: string) {
    this.action = rbac.action === RBAC_Action.ALLOW ? 'ALLOW' : rbac.action === RBAC_Action.DENY ? 'DENY' : 'LOG';
    // Envoy evaluates policies in name order (protobuf map iteration is sorted in its engine)
    this.policies = Object.keys(rbac.policies)
      .sort()
      .map((n) => compilePolicy(n, rbac.policies[n]!, `${where}.policies['${n}']`));
  }

  evaluate(q: RbacInput): RbacDecision {
    let matched = '';
    for (const p of this.policies) {
      if (p.matches(q)) {
        matched = p.name;
        break;
      }
    }
    switch (this.action) {
      case 'ALLOW':
        return { allowed: matched !== '', policy: matched };
      case 'DENY':
        return { allowed: matched === '', policy: matched };
      default:
        return { allowed: true, policy: matched };
    }
  }
}
