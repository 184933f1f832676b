// resolveCaptureConfig: defaults (from the spec table and the base of cases.yaml), environment
// variables, facts, and validation errors that name the offending flag or variable.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { parse } from 'yaml';
import { CaptureConfigError, resolveCaptureConfig, type CaptureFacts, type IptablesFlags } from '../../src/iptables/config';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const cases = parse(readFileSync(path.resolve(repoRoot, '../shared/conformance/iptables/cases.yaml'), 'utf8')) as {
  base: Record<string, unknown>;
};

const facts: CaptureFacts = { localAddresses: ['127.0.0.1', '::1', '10.1.2.3'], nameservers: ['10.96.0.10'], users: {} };
const resolve = (flags: Partial<IptablesFlags> = {}, env: Record<string, string> = {}, f: Partial<CaptureFacts> = {}) =>
  resolveCaptureConfig(flags, env, { ...facts, ...f });

t.test('with no flags and no environment the rule inputs are the base of the conformance cases', async (t) => {
  const cfg = resolve();
  for (const [key, value] of Object.entries(cases.base)) {
    t.same(cfg[key as keyof typeof cfg], value, key);
  }
});

t.test('run options default as in the spec flag table', async (t) => {
  const cfg = resolve();
  t.equal(cfg.probePort, 15002);
  t.equal(cfg.probeTimeoutMs, 5000);
  t.equal(cfg.outboundPortsExclude, '');
  t.same(
    [cfg.dryRun, cfg.cleanupOnly, cfg.forceApply, cfg.reconcile, cfg.skipRuleApply, cfg.runValidation, cfg.cniMode, cfg.dualStack],
    [false, false, false, false, false, false, false, false],
  );
  t.equal(cfg.networkNamespace, '');
  t.equal(cfg.hostIP, '10.1.2.3', 'loopback addresses are skipped');
});

t.test('proxy UID comes from --proxy-uid, else the PROXY_USER account, else 1337; GID follows the UID', async (t) => {
  t.equal(resolve({ 'proxy-uid': '3,4' }).proxyUID, '3,4');
  t.equal(resolve({}, {}, { users: { 'mesh-proxy': '1500' } }).proxyUID, '1500', 'default PROXY_USER is mesh-proxy');
  t.equal(resolve({}, { PROXY_USER: 'envoy' }, { users: { envoy: '101', 'mesh-proxy': '1500' } }).proxyUID, '101');
  t.equal(resolve({}, { PROXY_USER: 'nobody-here' }).proxyUID, '1337');
  t.equal(resolve({ 'proxy-uid': '42' }).proxyGID, '42');
  t.equal(resolve({ 'proxy-uid': '42', 'proxy-gid': '7' }).proxyGID, '7');
});

t.test('environment-only settings and flag fallbacks', async (t) => {
  const cfg = resolve(
    {},
    {
      MESH_OUTBOUND_OWNER_GROUPS: 'java,202',
      MESH_OUTBOUND_OWNER_GROUPS_EXCLUDE: '888',
      MESH_OUTBOUND_IPV4_LOOPBACK_CIDR: '127.0.0.1/8',
      INBOUND_INTERCEPTION_MODE: 'TPROXY',
      INBOUND_TPROXY_MARK: '1400',
      MESH_META_DNS_CAPTURE: 'true',
      INVALID_DROP: '1',
    },
  );
  t.equal(cfg.ownerGroupsInclude, 'java,202');
  t.equal(cfg.ownerGroupsExclude, '888');
  t.equal(cfg.hostIPv4LoopbackCidr, '127.0.0.1/8');
  t.equal(cfg.inboundInterceptionMode, 'TPROXY');
  t.equal(cfg.inboundTProxyMark, '1400');
  t.equal(cfg.redirectDNS, true);
  t.equal(cfg.dropInvalid, true);
  t.same(cfg.dnsServersV4, ['10.96.0.10'], 'DNS capture reads the resolv.conf servers');

  const flagWins = resolve(
    { 'mesh-inbound-interception-mode': 'REDIRECT', 'redirect-dns': false },
    {
      INBOUND_INTERCEPTION_MODE: 'TPROXY',
      MESH_META_DNS_CAPTURE: 'true',
    },
  );
  t.equal(flagWins.inboundInterceptionMode, 'REDIRECT', 'a given flag wins over its variable');
  t.equal(flagWins.redirectDNS, false);
});

t.test('IPv6 is enabled by the pod address family', async (t) => {
  t.equal(resolve({}, {}, { localAddresses: ['::1', 'fe80::1', '2001:db8::5'] }).enableIPv6, true, 'link-local is skipped');
  t.equal(resolve({}, {}, { localAddresses: ['10.0.0.1', '2001:db8::1'] }).enableIPv6, false, 'first address decides');
  const dual = resolve({ 'dual-stack': true }, {}, { localAddresses: ['10.0.0.1', '2001:db8::1'] });
  t.equal(dual.enableIPv6, true, 'with --dual-stack any IPv6 address enables IPv6');
  t.equal(dual.hostIP, '10.0.0.1');
  t.equal(resolve({}, {}, { localAddresses: ['::ffff:10.0.0.9'] }).enableIPv6, false, 'IPv4-mapped counts as IPv4');
  t.throws(() => resolve({}, {}, { localAddresses: ['127.0.0.1', '::1'] }), /no valid local IP address/);
});

t.test('DNS servers are split by family and only needed with --redirect-dns', async (t) => {
  const cfg = resolve({ 'redirect-dns': true }, {}, { nameservers: ['10.96.0.10', 'fd00::a', 'not-an-ip', '127.0.0.53'] });
  t.same(cfg.dnsServersV4, ['10.96.0.10', '127.0.0.53']);
  t.same(cfg.dnsServersV6, ['fd00::a']);
  t.same(resolve({ 'redirect-dns': true, 'capture-all-dns': true }).dnsServersV4, [], 'capture-all needs no servers');
  const unreadable = { nameservers: { error: 'ENOENT: no such file' } };
  t.throws(() => resolve({ 'redirect-dns': true }, {}, unreadable), /resolv\.conf.*ENOENT/);
  t.doesNotThrow(() => resolve({}, {}, unreadable), 'resolv.conf is not read without DNS capture');
});

t.test('lists are normalised', async (t) => {
  const cfg = resolve({
    'mesh-local-exclude-ports': '6000,7000,',
    'mesh-inbound-ports': ' 80 , 443',
    'mesh-service-cidr': '10.0.0.0/8, 2001:db8::/32',
    'orch-virt-interfaces': 'eth0,,eth1',
  });
  t.equal(cfg.inboundPortsExclude, '6000,7000');
  t.equal(cfg.inboundPortsInclude, '80,443');
  t.equal(cfg.outboundIPRangesInclude, '10.0.0.0/8,2001:db8::/32');
  t.equal(cfg.rerouteVirtualInterfaces, 'eth0,eth1');
  t.equal(resolve({ 'mesh-inbound-ports': '*' }).inboundPortsInclude, '*');
  t.equal(resolve({ 'mesh-service-cidr': '*' }).outboundIPRangesInclude, '*');
});

interface BadCase {
  name: string;
  flags?: Partial<IptablesFlags>;
  env?: Record<string, string>;
  source: string;
}
const bad: BadCase[] = [
  { name: 'non-numeric proxy port', flags: { 'proxy-port': 'abc' }, source: '--proxy-port' },
  { name: 'port 0', flags: { 'inbound-capture-port': '0' }, source: '--inbound-capture-port' },
  { name: 'port above 65535', flags: { 'inbound-tunnel-port': '70000' }, source: '--inbound-tunnel-port' },
  { name: 'bad inbound port list', flags: { 'mesh-inbound-ports': '80,http' }, source: '--mesh-inbound-ports' },
  { name: 'wildcard mixed with ports', flags: { 'mesh-inbound-ports': '*,80' }, source: '--mesh-inbound-ports' },
  { name: 'bad excluded inbound port', flags: { 'mesh-local-exclude-ports': '22,-1' }, source: '--mesh-local-exclude-ports' },
  { name: 'bad outbound port', flags: { 'mesh-outbound-ports': '99999' }, source: '--mesh-outbound-ports' },
  { name: 'bad excluded outbound port', flags: { 'mesh-local-outbound-ports-exclude': 'x' }, source: '--mesh-local-outbound-ports-exclude' },
  { name: 'CIDR with too long prefix', flags: { 'mesh-service-cidr': '10.0.0.0/33' }, source: '--mesh-service-cidr' },
  { name: 'address without prefix', flags: { 'mesh-service-cidr': '10.0.0.1' }, source: '--mesh-service-cidr' },
  { name: 'malformed IPv6 CIDR', flags: { 'mesh-service-cidr': '2001:db8:::/32' }, source: '--mesh-service-cidr' },
  { name: 'excluded CIDR garbage', flags: { 'mesh-service-exclude-cidr': '1.1.0.0/16,banana' }, source: '--mesh-service-exclude-cidr' },
  { name: 'wildcard exclusion', flags: { 'mesh-service-exclude-cidr': '*' }, source: '--mesh-service-exclude-cidr' },
  { name: 'unknown interception mode', flags: { 'mesh-inbound-interception-mode': 'NAT' }, source: '--mesh-inbound-interception-mode' },
  { name: 'lower-case mode', flags: { 'mesh-inbound-interception-mode': 'tproxy' }, source: '--mesh-inbound-interception-mode' },
  { name: 'mode from the environment', env: { INBOUND_INTERCEPTION_MODE: 'BOGUS' }, source: 'INBOUND_INTERCEPTION_MODE' },
  { name: 'non-numeric tproxy mark', flags: { 'mesh-inbound-tproxy-mark': '0x539' }, source: '--mesh-inbound-tproxy-mark' },
  { name: 'route table 0', flags: { 'mesh-inbound-tproxy-route-table': '0' }, source: '--mesh-inbound-tproxy-route-table' },
  { name: 'uid with a space', flags: { 'proxy-uid': '13 37' }, source: '--proxy-uid' },
  { name: 'interface name too long', flags: { 'mesh-exclude-interfaces': 'averyveryverylongname' }, source: '--mesh-exclude-interfaces' },
  { name: 'virtual interface with slash', flags: { 'orch-virt-interfaces': 'eth0/1' }, source: '--orch-virt-interfaces' },
  { name: 'probe port 0', flags: { 'iptables-probe-port': 0 }, source: '--iptables-probe-port' },
  { name: 'negative probe timeout', flags: { 'probe-timeout': -1 }, source: '--probe-timeout' },
  { name: 'namespace name with a space', flags: { 'network-namespace': 'my ns' }, source: '--network-namespace' },
  { name: 'non-loopback loopback CIDR', env: { MESH_OUTBOUND_IPV4_LOOPBACK_CIDR: '10.0.0.1/32' }, source: 'MESH_OUTBOUND_IPV4_LOOPBACK_CIDR' },
  { name: 'loopback CIDR wider than /8', env: { MESH_OUTBOUND_IPV4_LOOPBACK_CIDR: '127.0.0.1/4' }, source: 'MESH_OUTBOUND_IPV4_LOOPBACK_CIDR' },
  { name: 'IPv6 loopback CIDR', env: { MESH_OUTBOUND_IPV4_LOOPBACK_CIDR: '::1/128' }, source: 'MESH_OUTBOUND_IPV4_LOOPBACK_CIDR' },
  {
    name: 'more than 64 included owner groups',
    env: { MESH_OUTBOUND_OWNER_GROUPS: Array.from({ length: 65 }, (_, i) => String(1000 + i)).join(',') },
    source: 'MESH_OUTBOUND_OWNER_GROUPS',
  },
  { name: 'bad owner group', env: { MESH_OUTBOUND_OWNER_GROUPS_EXCLUDE: 'a b' }, source: 'MESH_OUTBOUND_OWNER_GROUPS_EXCLUDE' },
  { name: 'bad boolean variable', env: { MESH_META_DNS_CAPTURE: 'yes' }, source: 'MESH_META_DNS_CAPTURE' },
];

for (const c of bad) {
  t.test(`rejects ${c.name}`, async (t) => {
    try {
      resolve(c.flags, c.env);
      t.fail('no error');
    } catch (err) {
      t.type(err, CaptureConfigError);
      t.equal((err as CaptureConfigError).source, c.source);
      t.match((err as Error).message, c.source, 'the message names the source');
    }
  });
}

t.test('64 included owner groups are accepted', async (t) => {
  const groups = Array.from({ length: 64 }, (_, i) => String(1000 + i)).join(',');
  t.equal(resolve({}, { MESH_OUTBOUND_OWNER_GROUPS: groups }).ownerGroupsInclude, groups);
});
