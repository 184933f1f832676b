// The capture rules of a sidecar, as a pure function of the resolved configuration. The order of
// calls is the order of rules in each chain, so it follows Istio's configurator step by step.

import type { CaptureRuleConfig } from './config';
import { AGENT_DNS_PORT, Chain, INBOUND_PASSTHROUGH_SOURCE, IPV6_LOOPBACK_CIDR, OUTBOUND_MARK } from './constants';
import { formatCidr, isLoopback, parseCidr } from './ip';
import { splitList } from './lists';
import { RuleSet, VERSIONED, toRestoreText, type FamilyRules } from './rules';

interface NetworkRange {
  isWildcard: boolean;
  cidrs: string[];
  hasLoopback: boolean;
}

/** Splits a mixed CIDR list into IPv4 and IPv6 ranges; `*` is a wildcard for both. */
function separateV4V6(list: string): { v4: NetworkRange; v6: NetworkRange } {
  if (list.trim() === '*') {
    return { v4: { isWildcard: true, cidrs: [], hasLoopback: false }, v6: { isWildcard: true, cidrs: [], hasLoopback: false } };
  }
  const v4: NetworkRange = { isWildcard: false, cidrs: [], hasLoopback: false };
  const v6: NetworkRange = { isWildcard: false, cidrs: [], hasLoopback: false };
  for (const text of splitList(list)) {
    const c = parseCidr(text);
    if (!c) throw new Error(`invalid CIDR ${JSON.stringify(text)} reached the rule builder`);
    const range = c.addr.family === 4 ? v4 : v6;
    range.cidrs.push(formatCidr(c));
    if (isLoopback(c.addr)) range.hasLoopback = true;
  }
  return { v4, v6 };
}

/** DNS capture needs somewhere to send queries: all of port 53, or the resolv.conf servers. */
export function effectiveRedirectDNS(cfg: CaptureRuleConfig): boolean {
  return cfg.redirectDNS && (cfg.captureAllDNS || cfg.dnsServersV4.length > 0 || cfg.dnsServersV6.length > 0);
}

export function buildCaptureRules(cfg: CaptureRuleConfig): FamilyRules {
  const rs = new RuleSet(cfg.enableIPv6);
  const tproxy = cfg.inboundInterceptionMode === 'TPROXY';
  const loopback4 = cfg.hostIPv4LoopbackCidr;
  const excludeRanges = separateV4V6(cfg.outboundIPRangesExclude);
  const includeRanges = separateV4V6(cfg.outboundIPRangesInclude);
  const redirectDNS = effectiveRedirectDNS(cfg);
  const loopbackIncluded = includeRanges.v4.hasLoopback || includeRanges.v6.hasLoopback;

  // Excluded NICs bypass everything, so their RETURNs come first.
  for (const nic of splitList(cfg.excludeInterfaces)) {
    rs.append('nat', 'PREROUTING', '-i', nic, '-j', 'RETURN');
    rs.append('nat', 'OUTPUT', '-o', nic, '-j', 'RETURN');
  }
  if (tproxy) {
    for (const nic of splitList(cfg.excludeInterfaces)) {
      rs.append('mangle', 'PREROUTING', '-i', nic, '-j', 'RETURN');
      rs.append('mangle', 'OUTPUT', '-o', nic, '-j', 'RETURN');
    }
  }

  // Inbound traffic of virtual interfaces is treated as outbound further down; skip inbound capture.
  for (const nic of splitList(cfg.rerouteVirtualInterfaces)) {
    rs.insert('nat', 'PREROUTING', 1, '-i', nic, '-j', 'RETURN');
  }

  // Drop out-of-window packets instead of letting the kernel reset the connection.
  if (cfg.dropInvalid) {
    rs.append('mangle', 'PREROUTING', '-m', 'conntrack', '--ctstate', 'INVALID', '-j', Chain.DROP);
    rs.append('mangle', Chain.DROP, '-j', 'DROP');
  }

  // The tunnel port is served by the proxy directly.
  rs.append('nat', Chain.INBOUND, '-p', 'tcp', '--dport', cfg.inboundTunnelPort, '-j', 'RETURN');
  rs.append('nat', Chain.REDIRECT, '-p', 'tcp', '-j', 'REDIRECT', '--to-ports', cfg.proxyPort);
  rs.append('nat', Chain.IN_REDIRECT, '-p', 'tcp', '-j', 'REDIRECT', '--to-ports', cfg.inboundCapturePort);

  addInboundCapture(rs, cfg);

  // All outbound traffic (UDP included, for DNS) passes MESH_OUTPUT, which decides per packet.
  rs.append('nat', 'OUTPUT', '-j', Chain.OUTPUT);

  // Port exclusions must come before connections back to the pod itself are redirected.
  for (const p of splitList(cfg.outboundPortsExclude)) {
    rs.append('nat', Chain.OUTPUT, '-p', 'tcp', '--dport', p, '-j', 'RETURN');
    rs.append('nat', Chain.OUTPUT, '-p', 'udp', '--dport', p, '-j', 'RETURN');
  }

  // Connections the proxy makes from 127.0.0.6 / ::6 are its inbound passthrough to the app.
  rs.appendVersioned(INBOUND_PASSTHROUGH_SOURCE.v4, INBOUND_PASSTHROUGH_SOURCE.v6, 'nat', Chain.OUTPUT, '-o', 'lo', '-s', VERSIONED, '-j', 'RETURN');

  for (const uid of splitList(cfg.proxyUID)) {
    addProxyOwnerRules(rs, cfg, '--uid-owner', uid, { redirectDNS, loopbackIncluded, dnsSafeRedirect: redirectDNS });
  }
  for (const gid of splitList(cfg.proxyGID)) {
    // Istio keeps 53 out of the self-redirect only for UIDs; groups keep the plain tunnel-port form.
    addProxyOwnerRules(rs, cfg, '--gid-owner', gid, { redirectDNS, loopbackIncluded, dnsSafeRedirect: false });
  }

  addOwnerGroupFilter(rs, cfg);

  if (redirectDNS) addDnsCapture(rs, cfg);

  // Applications that talk to localhost explicitly (proxy-aware apps, sidecar to app) are left alone.
  rs.appendVersioned(loopback4, IPV6_LOOPBACK_CIDR, 'nat', Chain.OUTPUT, '-d', VERSIONED, '-j', 'RETURN');

  // Exclusions must precede inclusions.
  for (const c of excludeRanges.v4.cidrs) rs.appendV4('nat', Chain.OUTPUT, '-d', c, '-j', 'RETURN');
  for (const c of excludeRanges.v6.cidrs) rs.appendV6('nat', Chain.OUTPUT, '-d', c, '-j', 'RETURN');

  for (const p of splitList(cfg.outboundPortsInclude)) {
    rs.append('nat', Chain.OUTPUT, '-p', 'tcp', '--dport', p, '-j', Chain.REDIRECT);
  }

  addOutboundInclude(rs, cfg, includeRanges.v4, 4);
  addOutboundInclude(rs, cfg, includeRanges.v6, 6);

  if (tproxy) addTproxyMarks(rs, cfg);

  return rs.rules();
}

function addInboundCapture(rs: RuleSet, cfg: CaptureRuleConfig): void {
  if (cfg.inboundPortsInclude === '') return;
  const tproxy = cfg.inboundInterceptionMode === 'TPROXY';
  const table = tproxy ? 'mangle' : 'nat';
  if (tproxy) {
    // Marked packets are routed to loopback (see the policy route the executor installs),
    // where TPROXY hands them to the proxy's inbound listener.
    rs.append('mangle', Chain.DIVERT, '-j', 'MARK', '--set-mark', cfg.inboundTProxyMark);
    rs.append('mangle', Chain.DIVERT, '-j', 'ACCEPT');
    rs.appendVersioned(
      cfg.hostIPv4LoopbackCidr,
      IPV6_LOOPBACK_CIDR,
      'mangle',
      Chain.TPROXY,
      '!',
      '-d',
      VERSIONED,
      '-p',
      'tcp',
      '-j',
      'TPROXY',
      '--tproxy-mark',
      `${cfg.inboundTProxyMark}/0xffffffff`,
      '--on-port',
      cfg.inboundCapturePort,
    );
  }
  rs.append(table, 'PREROUTING', '-p', 'tcp', '-j', Chain.INBOUND);

  const capture = (...match: string[]) => {
    if (tproxy) {
      // Packets of established sockets go straight to loopback; new connections go through TPROXY.
      rs.append('mangle', Chain.INBOUND, '-p', 'tcp', ...match, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', Chain.DIVERT);
      rs.append('mangle', Chain.INBOUND, '-p', 'tcp', ...match, '-j', Chain.TPROXY);
    } else {
      rs.append('nat', Chain.INBOUND, '-p', 'tcp', ...match, '-j', Chain.IN_REDIRECT);
    }
  };

  if (cfg.inboundPortsInclude === '*') {
    for (const p of splitList(cfg.inboundPortsExclude)) {
      rs.append(table, Chain.INBOUND, '-p', 'tcp', '--dport', p, '-j', 'RETURN');
    }
    capture();
  } else {
    for (const p of splitList(cfg.inboundPortsInclude)) capture('--dport', p);
  }
}

function addProxyOwnerRules(
  rs: RuleSet,
  cfg: CaptureRuleConfig,
  ownerFlag: '--uid-owner' | '--gid-owner',
  owner: string,
  opts: { redirectDNS: boolean; loopbackIncluded: boolean; dnsSafeRedirect: boolean },
): void {
  // The proxy calling a service VIP that resolves to this pod goes back through inbound capture
  // (app → proxy → proxy inbound → app). With DNS capture, port 53 must not take that detour.
  const portMatch = opts.dnsSafeRedirect
    ? ['-m', 'multiport', '!', '--dports', `53,${cfg.inboundTunnelPort}`]
    : ['!', '--dport', cfg.inboundTunnelPort];
  rs.appendVersioned(
    cfg.hostIPv4LoopbackCidr,
    IPV6_LOOPBACK_CIDR,
    'nat',
    Chain.OUTPUT,
    '-o',
    'lo',
    '!',
    '-d',
    VERSIONED,
    '-p',
    'tcp',
    ...portMatch,
    '-m',
    'owner',
    ownerFlag,
    owner,
    '-j',
    Chain.IN_REDIRECT,
  );

  // Apps reaching themselves over loopback by pod address are not redirected, unless loopback was
  // explicitly included. DNS over TCP to a local resolver still needs capturing, hence the 53 carve-out.
  if (!opts.loopbackIncluded) {
    const dns = opts.redirectDNS ? ['-p', 'tcp', '!', '--dport', '53'] : [];
    rs.append('nat', Chain.OUTPUT, '-o', 'lo', ...dns, '-m', 'owner', '!', ownerFlag, owner, '-j', 'RETURN');
  }

  // Everything else the proxy sends leaves untouched, whatever the protocol, or it would loop.
  rs.append('nat', Chain.OUTPUT, '-m', 'owner', ownerFlag, owner, '-j', 'RETURN');
}

function addOwnerGroupFilter(rs: RuleSet, cfg: CaptureRuleConfig): void {
  if (cfg.ownerGroupsInclude.trim() === '*') {
    for (const g of splitList(cfg.ownerGroupsExclude)) {
      rs.append('nat', Chain.OUTPUT, '-m', 'owner', '--gid-owner', g, '-j', 'RETURN');
    }
    return;
  }
  // Capture only the listed groups: one rule returning traffic owned by none of them.
  const noneOf = splitList(cfg.ownerGroupsInclude).flatMap((g) => ['-m', 'owner', '!', '--gid-owner', g]);
  rs.append('nat', Chain.OUTPUT, ...noneOf, '-j', 'RETURN');
}

function addDnsCapture(rs: RuleSet, cfg: CaptureRuleConfig): void {
  // DNS is the one capture that also needs raw:OUTPUT (for conntrack zones), so it gets its own jump.
  rs.append('raw', 'OUTPUT', '-j', Chain.OUTPUT_DNS);

  // Jump to the DNS chain only for families that have something to capture.
  if (cfg.captureAllDNS || cfg.dnsServersV4.length > 0) rs.appendV4('nat', Chain.OUTPUT, '-j', Chain.OUTPUT_DNS);
  if (cfg.captureAllDNS || cfg.dnsServersV6.length > 0) rs.appendV6('nat', Chain.OUTPUT, '-j', Chain.OUTPUT_DNS);

  // Only the resolv.conf servers are captured, so a local resolver chain (app → agent → dnsmasq →
  // upstream) cannot loop back into the agent.
  if (cfg.captureAllDNS) {
    rs.append('nat', Chain.OUTPUT_DNS, '-p', 'tcp', '--dport', '53', '-j', 'REDIRECT', '--to-ports', AGENT_DNS_PORT);
  } else {
    for (const s of cfg.dnsServersV4) {
      rs.appendV4('nat', Chain.OUTPUT_DNS, '-p', 'tcp', '--dport', '53', '-d', `${s}/32`, '-j', 'REDIRECT', '--to-ports', AGENT_DNS_PORT);
    }
    for (const s of cfg.dnsServersV6) {
      rs.appendV6('nat', Chain.OUTPUT_DNS, '-p', 'tcp', '--dport', '53', '-d', `${s}/128`, '-j', 'REDIRECT', '--to-ports', AGENT_DNS_PORT);
    }
  }
  if (cfg.captureAllDNS) {
    rs.append('nat', Chain.OUTPUT_DNS, '-p', 'udp', '--dport', '53', '-j', 'REDIRECT', '--to-port', AGENT_DNS_PORT);
  } else {
    for (const s of cfg.dnsServersV4) {
      rs.appendV4('nat', Chain.OUTPUT_DNS, '-p', 'udp', '--dport', '53', '-d', `${s}/32`, '-j', 'REDIRECT', '--to-port', AGENT_DNS_PORT);
    }
    for (const s of cfg.dnsServersV6) {
      rs.appendV6('nat', Chain.OUTPUT_DNS, '-p', 'udp', '--dport', '53', '-d', `${s}/128`, '-j', 'REDIRECT', '--to-port', AGENT_DNS_PORT);
    }
  }
  addDnsConntrackZones(rs, cfg);
}

/**
 * Splits UDP DNS into two conntrack zones so the agent's upstream queries (zone 1) and its answers
 * to applications (zone 2) never collide in the UDP conntrack table.
 */
function addDnsConntrackZones(rs: RuleSet, cfg: CaptureRuleConfig): void {
  const owners: Array<['--uid-owner' | '--gid-owner', string]> = [
    ...splitList(cfg.proxyUID).map((u): ['--uid-owner', string] => ['--uid-owner', u]),
    ...splitList(cfg.proxyGID).map((g): ['--gid-owner', string] => ['--gid-owner', g]),
  ];
  for (const [flag, id] of owners) {
    rs.append('raw', Chain.OUTPUT_DNS, '-p', 'udp', '--dport', '53', '-m', 'owner', flag, id, '-j', 'CT', '--zone', '1');
    rs.append('raw', Chain.OUTPUT_DNS, '-p', 'udp', '--sport', AGENT_DNS_PORT, '-m', 'owner', flag, id, '-j', 'CT', '--zone', '2');
  }

  // The jump from raw:PREROUTING is only added when the chain gets rules, so it never points at an
  // empty chain.
  if (cfg.captureAllDNS) {
    rs.append('raw', 'PREROUTING', '-j', Chain.INBOUND);
    rs.append('raw', Chain.OUTPUT_DNS, '-p', 'udp', '--dport', '53', '-j', 'CT', '--zone', '2');
    rs.append('raw', Chain.INBOUND, '-p', 'udp', '--sport', '53', '-j', 'CT', '--zone', '1');
    return;
  }
  if (cfg.dnsServersV4.length > 0) rs.appendV4('raw', 'PREROUTING', '-j', Chain.INBOUND);
  for (const s of cfg.dnsServersV4) {
    rs.appendV4('raw', Chain.OUTPUT_DNS, '-p', 'udp', '--dport', '53', '-d', `${s}/32`, '-j', 'CT', '--zone', '2');
    rs.appendV4('raw', Chain.INBOUND, '-p', 'udp', '--sport', '53', '-s', `${s}/32`, '-j', 'CT', '--zone', '1');
  }
  if (cfg.dnsServersV6.length > 0) rs.appendV6('raw', 'PREROUTING', '-j', Chain.INBOUND);
  for (const s of cfg.dnsServersV6) {
    rs.appendV6('raw', Chain.OUTPUT_DNS, '-p', 'udp', '--dport', '53', '-d', `${s}/128`, '-j', 'CT', '--zone', '2');
    rs.appendV6('raw', Chain.INBOUND, '-p', 'udp', '--sport', '53', '-s', `${s}/128`, '-j', 'CT', '--zone', '1');
  }
}

function addOutboundInclude(rs: RuleSet, cfg: CaptureRuleConfig, range: NetworkRange, family: 4 | 6): void {
  const append = (...p: string[]) => (family === 4 ? rs.appendV4('nat', Chain.OUTPUT, ...p) : rs.appendV6('nat', Chain.OUTPUT, ...p));
  const insertPrerouting = (...p: string[]) => (family === 4 ? rs.insertV4('nat', 'PREROUTING', 1, ...p) : rs.insertV6('nat', 'PREROUTING', 1, ...p));
  const nics = splitList(cfg.rerouteVirtualInterfaces);
  if (range.isWildcard) {
    append('-j', Chain.REDIRECT);
    for (const nic of nics) insertPrerouting('-i', nic, '-j', Chain.REDIRECT);
    return;
  }
  for (const c of range.cidrs) {
    for (const nic of nics) insertPrerouting('-i', nic, '-d', c, '-j', Chain.REDIRECT);
    append('-d', c, '-j', Chain.REDIRECT);
  }
}

function addTproxyMarks(rs: RuleSet, cfg: CaptureRuleConfig): void {
  const mark = cfg.inboundTProxyMark;
  // Keep the mark the proxy's original_src listener filter sets as the connection mark.
  rs.append('mangle', 'PREROUTING', '-p', 'tcp', '-m', 'mark', '--mark', mark, '-j', 'CONNMARK', '--save-mark');
  // Already-marked proxy → app traffic must not be marked again.
  rs.append('mangle', 'OUTPUT', '-p', 'tcp', '-o', 'lo', '-m', 'mark', '--mark', mark, '-j', 'RETURN');
  // Proxy outbound → proxy inbound over loopback (app calling its own VIP) gets the outbound mark.
  for (const [flag, ids] of [
    ['--uid-owner', cfg.proxyUID],
    ['--gid-owner', cfg.proxyGID],
  ] as const) {
    for (const id of splitList(ids)) {
      rs.appendVersioned(
        cfg.hostIPv4LoopbackCidr,
        IPV6_LOOPBACK_CIDR,
        'mangle',
        'OUTPUT',
        '!',
        '-d',
        VERSIONED,
        '-p',
        'tcp',
        '-o',
        'lo',
        '-m',
        'owner',
        flag,
        id,
        '-j',
        'MARK',
        '--set-mark',
        OUTBOUND_MARK,
      );
    }
  }
  // Replies from the workload carry the connection mark back so the TPROXY policy route applies.
  rs.append('mangle', 'OUTPUT', '-p', 'tcp', '-m', 'connmark', '--mark', mark, '-j', 'CONNMARK', '--restore-mark');
  // These three must run before any capture in MESH_INBOUND: no loops, no capture of the proxy's
  // passthrough (127.0.0.6 / ::6), no capture of app-to-self traffic over loopback.
  rs.insert('mangle', Chain.INBOUND, 1, '-p', 'tcp', '-m', 'mark', '--mark', mark, '-j', 'RETURN');
  rs.insertV4('mangle', Chain.INBOUND, 2, '-p', 'tcp', '-s', INBOUND_PASSTHROUGH_SOURCE.v4, '-i', 'lo', '-j', 'RETURN');
  rs.insertV6('mangle', Chain.INBOUND, 2, '-p', 'tcp', '-s', INBOUND_PASSTHROUGH_SOURCE.v6, '-i', 'lo', '-j', 'RETURN');
  rs.insert('mangle', Chain.INBOUND, 3, '-p', 'tcp', '-i', 'lo', '-m', 'mark', '!', '--mark', OUTBOUND_MARK, '-j', 'RETURN');
}

export interface RestoreTexts {
  readonly v4: string;
  readonly v6: string;
}

/** The iptables-restore and ip6tables-restore inputs for a configuration (v6 empty without IPv6). */
export function buildRestoreTexts(cfg: CaptureRuleConfig): RestoreTexts {
  const rules = buildCaptureRules(cfg);
  return { v4: toRestoreText(rules.v4), v6: toRestoreText(rules.v6) };
}
