// src/lib/hostport against Go's own table: TestSplitHostPort and TestJoinHostPort in go/src/net/ip_test.go.
import t from 'tap';
import { HostPortError, joinHostPort, splitHostPort } from '../../src/lib/hostport';
import { defaultProxyConfig, validateProxyConfig } from '../../src/inject/mesh';

t.test('SplitHostPort: the cases that split', async (t) => {
  const ok: [string, string, string][] = [
    ['localhost:http', 'localhost', 'http'],
    ['localhost:80', 'localhost', '80'],
    ['localhost%lo0:http', 'localhost%lo0', 'http'],
    ['localhost%lo0:80', 'localhost%lo0', '80'],
    ['[localhost%lo0]:http', 'localhost%lo0', 'http'],
    ['[localhost%lo0]:80', 'localhost%lo0', '80'],
    ['127.0.0.1:http', '127.0.0.1', 'http'],
    ['127.0.0.1:80', '127.0.0.1', '80'],
    ['[::1]:http', '::1', 'http'],
    ['[::1]:80', '::1', '80'],
    ['[::1%lo0]:http', '::1%lo0', 'http'],
    ['[::1%lo0]:80', '::1%lo0', '80'],
    [':http', '', 'http'],
    [':80', '', '80'],
    ['golang.org:', 'golang.org', ''],
    ['127.0.0.1:', '127.0.0.1', ''],
    ['[::1]:', '::1', ''],
    ['golang.org:https%foo', 'golang.org', 'https%foo'],
  ];
  for (const [hostPort, host, port] of ok) t.same(splitHostPort(hostPort), { host, port }, hostPort);
});

t.test("SplitHostPort: the cases that fail, with Go's error text", async (t) => {
  const bad: [string, string][] = [
    ['golang.org', 'missing port in address'],
    ['127.0.0.1', 'missing port in address'],
    ['[::1]', 'missing port in address'],
    ['[fe80::1%lo0]', 'missing port in address'],
    ['[localhost%lo0]', 'missing port in address'],
    ['localhost%lo0', 'missing port in address'],
    ['::1', 'too many colons in address'],
    ['fe80::1%lo0', 'too many colons in address'],
    ['fe80::1%lo0:80', 'too many colons in address'],
    ['[foo:bar]', 'missing port in address'],
    ['[foo:bar]baz', 'missing port in address'],
    ['[foo]bar:baz', 'missing port in address'],
    ['[foo]:[bar]:baz', 'too many colons in address'],
    ['[foo]:[bar]baz', "unexpected '[' in address"],
    ['foo[bar]:baz', "unexpected '[' in address"],
    ['foo]bar:baz', "unexpected ']' in address"],
  ];
  for (const [hostPort, err] of bad) {
    t.throws(() => splitHostPort(hostPort), new HostPortError(hostPort, err), hostPort);
    t.throws(() => splitHostPort(hostPort), { message: `address ${hostPort}: ${err}` });
  }
  t.throws(() => splitHostPort('[::1:80'), { message: "address [::1:80: missing ']' in address" });
  t.throws(() => splitHostPort(''), { message: 'missing port in address' }, 'an empty address is not named, as in Go');
});

t.test('JoinHostPort', async (t) => {
  const cases: [string, string, string][] = [
    ['localhost', 'http', 'localhost:http'],
    ['localhost', '80', 'localhost:80'],
    ['localhost%lo0', 'http', 'localhost%lo0:http'],
    ['localhost%lo0', '80', 'localhost%lo0:80'],
    ['127.0.0.1', 'http', '127.0.0.1:http'],
    ['127.0.0.1', '80', '127.0.0.1:80'],
    ['::1', 'http', '[::1]:http'],
    ['::1', '80', '[::1]:80'],
    ['::1%lo0', 'http', '[::1%lo0]:http'],
    ['::1%lo0', '80', '[::1%lo0]:80'],
    ['', 'http', ':http'],
    ['', '80', ':80'],
    ['golang.org', '', 'golang.org:'],
    ['127.0.0.1', '', '127.0.0.1:'],
    ['::1', '', '[::1]:'],
    ['golang.org', 'https%foo', 'golang.org:https%foo'],
  ];
  for (const [host, port, want] of cases) t.equal(joinHostPort(host, port), want, `${host} ${port}`);
  t.equal(joinHostPort('::', 15010), '[::]:15010', 'a numeric port');
});

t.test("the injector's proxy address check splits as Istio's ValidateProxyAddress (net.SplitHostPort)", async (t) => {
  const errs = (discoveryAddress: string) => validateProxyConfig({ ...defaultProxyConfig(), discoveryAddress });
  t.same(
    errs('::1:15012'),
    ['invalid discovery address: unable to split "::1:15012": address ::1:15012: too many colons in address'],
    'an unbracketed IPv6 literal',
  );
  t.same(errs('meshd.mesh-system.svc'), [
    'invalid discovery address: unable to split "meshd.mesh-system.svc": address meshd.mesh-system.svc: missing port in address',
  ]);
  t.same(errs('[::1]:15012'), [], 'a bracketed one is fine');
});
