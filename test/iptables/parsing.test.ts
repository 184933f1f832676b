// Parsers of system text: resolv.conf, passwd, `ip -o addr show`, iptables-save; and the pure
// route and cleanup plans derived from them.
import t from 'tap';
import { parseIpAddrShow, parsePasswd, parseResolvConf } from '../../src/iptables/facts';
import { routeCommands } from '../../src/iptables/routes';
import { cleanupPlan, parseSave, tokenize } from '../../src/iptables/state';

t.test('resolv.conf nameservers', async (t) => {
  const text = [
    '# generated',
    'search default.svc.cluster.local svc.cluster.local',
    'nameserver 10.96.0.10',
    'nameserver   fd00::10   # second',
    ';nameserver 1.1.1.1',
    'options ndots:5',
    'nameserver',
  ].join('\n');
  t.same(parseResolvConf(text), ['10.96.0.10', 'fd00::10']);
});

t.test('passwd accounts', async (t) => {
  t.same(parsePasswd('root:x:0:0:root:/root:/bin/bash\nmesh-proxy:x:1337:1337::/home:/sbin/nologin\nbroken\n'), {
    root: '0',
    'mesh-proxy': '1337',
  });
});

t.test('ip -o addr show', async (t) => {
  const text = [
    '1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever',
    '1: lo    inet6 ::1/128 scope host \\       valid_lft forever preferred_lft forever',
    '3: eth0@if9    inet 10.244.1.7/24 brd 10.244.1.255 scope global eth0\\       valid_lft forever',
    '3: eth0@if9    inet6 fe80::1c2f:aff:fe00:1/64 scope link \\       valid_lft forever',
  ].join('\n');
  t.same(parseIpAddrShow(text), ['127.0.0.1', '::1', '10.244.1.7', 'fe80::1c2f:aff:fe00:1']);
});

t.test('saved rules keep quoted arguments together', async (t) => {
  t.same(tokenize('-A INPUT -m comment --comment "allow \\"dns\\" here" -j ACCEPT'), [
    '-A',
    'INPUT',
    '-m',
    'comment',
    '--comment',
    'allow "dns" here',
    '-j',
    'ACCEPT',
  ]);
  const state = parseSave('*nat\n:OUTPUT ACCEPT [0:0]\n:MESH_OUTPUT - [0:0]\n-A OUTPUT -m comment --comment "x y" -j MESH_OUTPUT\nCOMMIT\n');
  t.same([...state.get('nat')!.keys()], ['OUTPUT', 'MESH_OUTPUT']);
  t.same(cleanupPlan(state, []).restore, '* nat\n-D OUTPUT -m comment --comment "x y" -j MESH_OUTPUT\n-F MESH_OUTPUT\n-X MESH_OUTPUT\nCOMMIT\n');
});

t.test('routes: ::6 for IPv6, policy routing only for TPROXY with inbound capture', async (t) => {
  const base = { enableIPv6: false, inboundPortsInclude: '', inboundInterceptionMode: '', inboundTProxyMark: '1337', inboundTProxyRouteTable: '133' };
  t.same(routeCommands(base as never), []);
  t.same(routeCommands({ ...base, enableIPv6: true } as never), [['-6', 'addr', 'add', '::6/128', 'dev', 'lo']]);
  t.same(routeCommands({ ...base, inboundPortsInclude: '*', inboundInterceptionMode: 'REDIRECT' } as never), []);
  t.same(routeCommands({ ...base, enableIPv6: true, inboundPortsInclude: '80', inboundInterceptionMode: 'TPROXY' } as never), [
    ['-6', 'addr', 'add', '::6/128', 'dev', 'lo'],
    ['-4', 'rule', 'add', 'fwmark', '1337', 'lookup', '133'],
    ['-6', 'rule', 'add', 'fwmark', '1337', 'lookup', '133'],
    ['-4', 'route', 'add', 'local', '0.0.0.0/0', 'dev', 'lo', 'table', '133'],
    ['-6', 'route', 'add', 'local', '::/0', 'dev', 'lo', 'table', '133'],
  ]);
});
