// The resolved configuration of `pilot-agent mesh-iptables`, and the pure function that builds it
// from parsed flags, environment variables and facts read from the system. Every validation error
// names the flag or variable the user has to fix.

import { DEFAULT_PROXY_UID, DEFAULT_PROXY_USER, MAX_OWNER_GROUPS_INCLUDE } from './constants';
import { formatIp, isLinkLocalMulticast, isLinkLocalUnicast, isLoopback, parseCidr, parseIp, unmap } from './ip';
import { splitList } from './lists';

export type InterceptionMode = '' | 'REDIRECT' | 'TPROXY';

/**
 * What the rule builder needs. Field names and value forms are those of the conformance cases:
 * port and CIDR lists stay comma-separated strings, exactly as Istio's configurator holds them.
 */
export interface CaptureRuleConfig {
  proxyPort: string;
  inboundCapturePort: string;
  inboundTunnelPort: string;
  /** Comma-separated UIDs (or user names) whose traffic is never redirected. */
  proxyUID: string;
  proxyGID: string;
  inboundTProxyMark: string;
  inboundTProxyRouteTable: string;
  /** `*` or comma-separated groups (names or GIDs) whose outbound traffic is captured. */
  ownerGroupsInclude: string;
  /** Groups excluded from capture; only used when ownerGroupsInclude is `*`. */
  ownerGroupsExclude: string;
  hostIPv4LoopbackCidr: string;
  inboundInterceptionMode: InterceptionMode;
  /** `*`, a port list, or empty (no inbound capture). */
  inboundPortsInclude: string;
  inboundPortsExclude: string;
  /** `*`, a CIDR list (IPv4 and IPv6 mixed), or empty (no outbound capture by address). */
  outboundIPRangesInclude: string;
  outboundIPRangesExclude: string;
  outboundPortsInclude: string;
  outboundPortsExclude: string;
  rerouteVirtualInterfaces: string;
  excludeInterfaces: string;
  redirectDNS: boolean;
  captureAllDNS: boolean;
  dropInvalid: boolean;
  /** Also program ip6tables: the pod's own address is IPv6 (with --dual-stack: any of them). */
  enableIPv6: boolean;
  dnsServersV4: readonly string[];
  dnsServersV6: readonly string[];
}

/** The full resolved configuration: rule inputs plus how and where to apply them. */
export interface CaptureConfig extends CaptureRuleConfig {
  dualStack: boolean;
  /** The pod address that decided enableIPv6; validation probes that family. */
  hostIP: string;
  probePort: number;
  probeTimeoutMs: number;
  dryRun: boolean;
  cleanupOnly: boolean;
  forceApply: boolean;
  reconcile: boolean;
  skipRuleApply: boolean;
  /** `ip netns` name, or a path such as /proc/<pid>/ns/net; empty means the current namespace. */
  networkNamespace: string;
  runValidation: boolean;
  cniMode: boolean;
}

/** Parsed flag values keyed by long flag name (spec 4.4), typed as the CLI delivers them. */
export interface IptablesFlags {
  'capture-all-dns': boolean;
  'cleanup-only': boolean;
  'cni-mode': boolean;
  'drop-invalid': boolean;
  'dry-run': boolean;
  'dual-stack': boolean;
  'proxy-port': string;
  'force-apply': boolean;
  'inbound-capture-port': string;
  'inbound-tunnel-port': string;
  'iptables-probe-port': number;
  'mesh-exclude-interfaces': string;
  'mesh-inbound-interception-mode': string;
  'mesh-inbound-ports': string;
  'mesh-inbound-tproxy-mark': string;
  'mesh-inbound-tproxy-route-table': string;
  'mesh-local-exclude-ports': string;
  'mesh-local-outbound-ports-exclude': string;
  'mesh-outbound-ports': string;
  'mesh-service-cidr': string;
  'mesh-service-exclude-cidr': string;
  'orch-virt-interfaces': string;
  'network-namespace': string;
  /** Milliseconds. */
  'probe-timeout': number;
  'proxy-gid': string;
  'proxy-uid': string;
  reconcile: boolean;
  'redirect-dns': boolean;
  'run-validation': boolean;
  'skip-rule-apply': boolean;
}

export const IPTABLES_FLAG_DEFAULTS: Readonly<IptablesFlags> = {
  'capture-all-dns': false,
  'cleanup-only': false,
  'cni-mode': false,
  'drop-invalid': false,
  'dry-run': false,
  'dual-stack': false,
  'proxy-port': '15001',
  'force-apply': false,
  'inbound-capture-port': '15006',
  'inbound-tunnel-port': '15008',
  'iptables-probe-port': 15002,
  'mesh-exclude-interfaces': '',
  'mesh-inbound-interception-mode': '',
  'mesh-inbound-ports': '',
  'mesh-inbound-tproxy-mark': '1337',
  'mesh-inbound-tproxy-route-table': '133',
  'mesh-local-exclude-ports': '',
  'mesh-local-outbound-ports-exclude': '',
  'mesh-outbound-ports': '',
  'mesh-service-cidr': '',
  'mesh-service-exclude-cidr': '',
  'orch-virt-interfaces': '',
  'network-namespace': '',
  'probe-timeout': 5000,
  'proxy-gid': '',
  'proxy-uid': '',
  reconcile: false,
  'redirect-dns': false,
  'run-validation': false,
  'skip-rule-apply': false,
};

/**
 * Variables a flag falls back to when the flag is absent from the input. They match the `env` of the
 * command table, so calling the resolver directly gives what the CLI gives.
 */
const FLAG_ENV: Partial<Record<keyof IptablesFlags, string>> = {
  'drop-invalid': 'INVALID_DROP',
  'dual-stack': 'MESH_DUAL_STACK',
  'mesh-inbound-interception-mode': 'INBOUND_INTERCEPTION_MODE',
  'mesh-inbound-tproxy-mark': 'INBOUND_TPROXY_MARK',
  'redirect-dns': 'MESH_META_DNS_CAPTURE',
};

/** Environment-only settings (no flag). */
export const ENV = {
  ownerGroupsInclude: 'MESH_OUTBOUND_OWNER_GROUPS',
  ownerGroupsExclude: 'MESH_OUTBOUND_OWNER_GROUPS_EXCLUDE',
  loopbackCidr: 'MESH_OUTBOUND_IPV4_LOOPBACK_CIDR',
  proxyUser: 'PROXY_USER',
  dryRunFile: 'DRY_RUN_FILE_PATH',
} as const;

/** What the resolver needs from the system, read beforehand so resolution stays pure. */
export interface CaptureFacts {
  /** Addresses of the (target namespace's) interfaces in kernel order, any family, loopback included. */
  readonly localAddresses: readonly string[];
  /** Nameservers of /etc/resolv.conf in file order, or why the file could not be read. */
  readonly nameservers: readonly string[] | { readonly error: string };
  /** Account name → UID, from /etc/passwd. */
  readonly users: Readonly<Record<string, string>>;
}

export type Env = Readonly<Record<string, string | undefined>>;

/** A configuration value the user must fix; `source` is the flag (`--proxy-port`) or variable. */
export class CaptureConfigError extends Error {
  constructor(
    readonly source: string,
    message: string,
  ) {
    super(message);
    this.name = 'CaptureConfigError';
  }
}

function invalid(source: string, value: string | number, why: string): CaptureConfigError {
  return new CaptureConfigError(source, `invalid value ${JSON.stringify(String(value))} for ${source}: ${why}`);
}

const flagName = (name: keyof IptablesFlags): string => `--${name}`;

// ---------------------------------------------------------------------------------------------
// Value parsers: each returns the normalised text or throws naming its source.

function port(source: string, text: string): string {
  const t = text.trim();
  if (!/^[0-9]{1,5}$/.test(t) || Number(t) < 1 || Number(t) > 65535) {
    throw invalid(source, text, 'must be a port number between 1 and 65535');
  }
  return String(Number(t));
}

function portList(source: string, text: string, allowWildcard: boolean): string {
  if (allowWildcard && text.trim() === '*') return '*';
  const items = splitList(text).map((p) => p.trim());
  for (const p of items) {
    if (p === '*') throw invalid(source, text, allowWildcard ? '"*" cannot be combined with ports' : '"*" is not allowed here');
    if (!/^[0-9]{1,5}$/.test(p) || Number(p) < 1 || Number(p) > 65535) {
      throw invalid(source, text, `"${p}" is not a port number between 1 and 65535`);
    }
  }
  return items.map((p) => String(Number(p))).join(',');
}

function cidrList(source: string, text: string, allowWildcard: boolean): string {
  if (text.trim() === '*') {
    if (!allowWildcard) throw invalid(source, text, '"*" is not allowed; list the ranges to exclude');
    return '*';
  }
  const items = splitList(text).map((c) => c.trim());
  for (const c of items) {
    if (!parseCidr(c)) throw invalid(source, text, `"${c}" is not a CIDR such as 10.0.0.0/8 or 2001:db8::/32`);
  }
  return items.join(',');
}

const ACCOUNT_NAME = /^(?:[0-9]+|[A-Za-z_][A-Za-z0-9_.-]*\$?)$/;

function accountList(source: string, text: string, what: string): string {
  const items = splitList(text).map((s) => s.trim());
  for (const item of items) {
    if (!ACCOUNT_NAME.test(item)) throw invalid(source, text, `"${item}" is not a ${what} name or number`);
  }
  return items.join(',');
}

function interfaceList(source: string, text: string): string {
  const items = splitList(text).map((s) => s.trim());
  for (const item of items) {
    // Linux accepts up to 15 bytes without '/', ':' or whitespace; iptables adds '+' as a wildcard.
    if (!/^[^\s/:,]{1,15}$/.test(item) || item === '.' || item === '..') {
      throw invalid(source, text, `"${item}" is not a network interface name`);
    }
  }
  return items.join(',');
}

function uint32(source: string, text: string, min: number): string {
  const t = text.trim();
  if (!/^[0-9]{1,10}$/.test(t) || Number(t) < min || Number(t) > 0xffffffff) {
    throw invalid(source, text, `must be a decimal integer between ${min} and 4294967295`);
  }
  return String(Number(t));
}

function interceptionMode(source: string, text: string): InterceptionMode {
  const t = text.trim();
  if (t === '' || t === 'REDIRECT' || t === 'TPROXY') return t;
  throw invalid(source, text, 'must be REDIRECT or TPROXY');
}

function loopbackCidr(source: string, text: string): string {
  const c = parseCidr(text.trim());
  if (!c) throw invalid(source, text, 'must be a CIDR such as 127.0.0.1/32');
  if (c.addr.family !== 4 || !isLoopback(c.addr)) throw invalid(source, text, 'must be an IPv4 loopback range (127.0.0.0/8)');
  if (c.bits < 8) throw invalid(source, text, 'prefix length must be between 8 and 32');
  return text.trim();
}

/** The --network-namespace value, validated; facts have to be read there before resolving the rest. */
export function networkNamespaceFlag(flags: Partial<IptablesFlags>): string {
  return networkNamespace(flagName('network-namespace'), flags['network-namespace'] ?? '');
}

function networkNamespace(source: string, text: string): string {
  const t = text.trim();
  if (t === '' || t.includes('/')) return t;
  if (!/^[A-Za-z0-9_.-]+$/.test(t) || t === '.' || t === '..') {
    throw invalid(source, text, 'must be an `ip netns` name or a namespace path such as /proc/<pid>/ns/net');
  }
  return t;
}

/** Go strconv.ParseBool, which Istio's env variables use. */
function envBool(name: string, text: string): boolean {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(text)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(text)) return false;
  throw invalid(name, text, 'must be true or false');
}

// ---------------------------------------------------------------------------------------------

/** Takes the mesh-iptables flags out of generic CLI values, checking each has its declared type. */
export function pickIptablesFlags(values: Readonly<Record<string, unknown>>): Partial<IptablesFlags> {
  const out: Record<string, unknown> = {};
  for (const [name, def] of Object.entries(IPTABLES_FLAG_DEFAULTS)) {
    const v = values[name];
    if (v === undefined) continue;
    if (typeof v !== typeof def) throw new Error(`flag --${name} has type ${typeof v}, expected ${typeof def}`);
    out[name] = v;
  }
  return out as Partial<IptablesFlags>;
}

/** The pod's own address (the first that is not loopback or link-local) and whether IPv6 rules are needed. */
export function pickHostAddress(addresses: readonly string[], dualStack: boolean): { ip: string; isIPv6: boolean } | undefined {
  let chosen: { ip: string; isIPv6: boolean } | undefined;
  for (const text of addresses) {
    const parsed = parseIp(text.split('%')[0]!);
    if (!parsed) continue;
    const a = unmap(parsed);
    if (isLoopback(a) || isLinkLocalUnicast(a) || isLinkLocalMulticast(a)) continue;
    const candidate = { ip: formatIp(a), isIPv6: a.family === 6 };
    if (!dualStack) return candidate;
    // Dual stack: the first address is the host IP, but any IPv6 address turns IPv6 rules on.
    chosen = chosen ? { ip: chosen.ip, isIPv6: candidate.isIPv6 } : candidate;
    if (candidate.isIPv6) break;
  }
  return chosen;
}

function splitNameservers(servers: readonly string[]): { v4: string[]; v6: string[] } {
  const v4: string[] = [];
  const v6: string[] = [];
  for (const s of servers) {
    const a = parseIp(s);
    if (!a) continue; // resolvers with zones or junk cannot be matched by an iptables rule anyway
    (a.family === 4 ? v4 : v6).push(formatIp(a));
  }
  return { v4, v6 };
}

export function resolveCaptureConfig(flags: Partial<IptablesFlags>, env: Env, facts: CaptureFacts): CaptureConfig {
  // A value and where it came from, so an error names the flag or the variable actually used.
  const str = (name: keyof IptablesFlags): [source: string, value: string] => {
    const v = flags[name];
    if (v !== undefined) return [flagName(name), String(v)];
    const envName = FLAG_ENV[name];
    const fromEnv = envName ? env[envName] : undefined;
    if (envName && fromEnv !== undefined) return [envName, fromEnv];
    return [flagName(name), String(IPTABLES_FLAG_DEFAULTS[name])];
  };
  const bool = (name: keyof IptablesFlags): boolean => {
    const v = flags[name];
    if (typeof v === 'boolean') return v;
    const envName = FLAG_ENV[name];
    const fromEnv = envName ? env[envName] : undefined;
    if (envName && fromEnv !== undefined && fromEnv !== '') return envBool(envName, fromEnv);
    return IPTABLES_FLAG_DEFAULTS[name] as boolean;
  };
  const num = (name: 'iptables-probe-port' | 'probe-timeout'): number => flags[name] ?? IPTABLES_FLAG_DEFAULTS[name];
  const envOr = (name: string, def: string): string => env[name] ?? def;

  const dualStack = bool('dual-stack');
  const redirectDNS = bool('redirect-dns');
  const captureAllDNS = bool('capture-all-dns');

  const probePort = num('iptables-probe-port');
  if (!Number.isInteger(probePort) || probePort < 1 || probePort > 65535) {
    throw invalid(flagName('iptables-probe-port'), probePort, 'must be a port number between 1 and 65535');
  }
  const probeTimeoutMs = num('probe-timeout');
  if (!Number.isFinite(probeTimeoutMs) || probeTimeoutMs < 0) {
    throw invalid(flagName('probe-timeout'), probeTimeoutMs, 'must be a non-negative duration such as 5s');
  }

  // The proxy runs as PROXY_USER; without that account Istio's well-known 1337 is assumed.
  let proxyUID = accountList(...str('proxy-uid'), 'user');
  if (proxyUID === '') proxyUID = facts.users[envOr(ENV.proxyUser, DEFAULT_PROXY_USER)] ?? DEFAULT_PROXY_UID;
  let proxyGID = accountList(...str('proxy-gid'), 'group');
  // The proxy's group is assumed to share its UID's number, as in Istio (TPROXY relies on it).
  if (proxyGID === '') proxyGID = proxyUID;

  const ownerGroupsInclude = envOr(ENV.ownerGroupsInclude, '*').trim();
  const ownerGroupsExclude = envOr(ENV.ownerGroupsExclude, '');
  const include = ownerGroupsInclude === '*' ? '*' : accountList(ENV.ownerGroupsInclude, ownerGroupsInclude, 'group');
  const exclude = accountList(ENV.ownerGroupsExclude, ownerGroupsExclude, 'group');
  if (include !== '*' && splitList(include).length > MAX_OWNER_GROUPS_INCLUDE) {
    throw invalid(
      ENV.ownerGroupsInclude,
      ownerGroupsInclude,
      `at most ${MAX_OWNER_GROUPS_INCLUDE} groups can be captured, got ${splitList(include).length}`,
    );
  }

  const host = pickHostAddress(facts.localAddresses, dualStack);
  if (!host) {
    throw new CaptureConfigError('network', 'no valid local IP address found: cannot tell whether the pod is IPv4 or IPv6');
  }

  let dnsServersV4: string[] = [];
  let dnsServersV6: string[] = [];
  // resolv.conf only matters when capturing DNS to its servers; do not fail on it otherwise.
  if (redirectDNS && !captureAllDNS) {
    if (!Array.isArray(facts.nameservers)) {
      throw new CaptureConfigError('/etc/resolv.conf', `failed to load /etc/resolv.conf: ${(facts.nameservers as { error: string }).error}`);
    }
    ({ v4: dnsServersV4, v6: dnsServersV6 } = splitNameservers(facts.nameservers as readonly string[]));
  }

  return {
    proxyPort: port(...str('proxy-port')),
    inboundCapturePort: port(...str('inbound-capture-port')),
    inboundTunnelPort: port(...str('inbound-tunnel-port')),
    proxyUID,
    proxyGID,
    inboundTProxyMark: uint32(...str('mesh-inbound-tproxy-mark'), 1),
    inboundTProxyRouteTable: uint32(...str('mesh-inbound-tproxy-route-table'), 1),
    ownerGroupsInclude: include,
    ownerGroupsExclude: exclude,
    hostIPv4LoopbackCidr: loopbackCidr(ENV.loopbackCidr, envOr(ENV.loopbackCidr, '127.0.0.1/32')),
    inboundInterceptionMode: interceptionMode(...str('mesh-inbound-interception-mode')),
    inboundPortsInclude: portList(...str('mesh-inbound-ports'), true),
    inboundPortsExclude: portList(...str('mesh-local-exclude-ports'), false),
    outboundIPRangesInclude: cidrList(...str('mesh-service-cidr'), true),
    outboundIPRangesExclude: cidrList(...str('mesh-service-exclude-cidr'), false),
    outboundPortsInclude: portList(...str('mesh-outbound-ports'), false),
    outboundPortsExclude: portList(...str('mesh-local-outbound-ports-exclude'), false),
    rerouteVirtualInterfaces: interfaceList(...str('orch-virt-interfaces')),
    excludeInterfaces: interfaceList(...str('mesh-exclude-interfaces')),
    redirectDNS,
    captureAllDNS,
    dropInvalid: bool('drop-invalid'),
    enableIPv6: host.isIPv6,
    dnsServersV4,
    dnsServersV6,
    dualStack,
    hostIP: host.ip,
    probePort,
    probeTimeoutMs,
    dryRun: bool('dry-run'),
    cleanupOnly: bool('cleanup-only'),
    forceApply: bool('force-apply'),
    reconcile: bool('reconcile'),
    skipRuleApply: bool('skip-rule-apply'),
    networkNamespace: networkNamespace(...str('network-namespace')),
    runValidation: bool('run-validation'),
    cniMode: bool('cni-mode'),
  };
}
