// Address and CIDR text handling, following Go net/netip (which Istio's rule output is made with).
import t from 'tap';
import { formatCidr, formatIp, isLoopback, parseCidr, parseIp } from '../../src/iptables/ip';

t.test('IPv6 text is canonical (RFC 5952), as netip prints it', async (t) => {
  const cases: Array<[string, string]> = [
    ['2001:0DB8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    ['0:0:0:0:0:0:0:1', '::1'],
    ['::', '::'],
    ['1:0:0:2:0:0:0:3', '1:0:0:2::3'],
    ['1:0:0:2:3:0:0:4', '1::2:3:0:0:4'],
    ['1:0:1:0:1:0:1:0', '1:0:1:0:1:0:1:0'],
    ['::ffff:1.2.3.4', '::ffff:1.2.3.4'],
    ['::127.0.0.53', '::7f00:35'],
    ['fd00::a', 'fd00::a'],
  ];
  for (const [input, want] of cases) t.equal(formatIp(parseIp(input)!), want, input);
});

t.test('strict parsing', async (t) => {
  for (const bad of ['1.2.3', '1.2.3.4.5', '01.2.3.4', '256.1.1.1', '1:2:3:4:5:6:7:8:9', '1::2::3', 'fe80::1%eth0', '12345::', '']) {
    t.equal(parseIp(bad), undefined, `${JSON.stringify(bad)} is not an address`);
  }
  for (const bad of ['10.0.0.0', '10.0.0.0/33', '10.0.0.0/08', '::/129', '10.0.0.0/-1', 'x/8']) {
    t.equal(parseCidr(bad), undefined, `${JSON.stringify(bad)} is not a CIDR`);
  }
});

t.test('CIDRs keep their unmasked address', async (t) => {
  t.equal(formatCidr(parseCidr('127.0.0.1/8')!), '127.0.0.1/8');
  t.equal(formatCidr(parseCidr('2001:DB8::/32')!), '2001:db8::/32');
});

t.test('loopback', async (t) => {
  t.ok(isLoopback(parseIp('127.1.2.3')!));
  t.ok(isLoopback(parseIp('::1')!));
  t.notOk(isLoopback(parseIp('::2')!));
  t.notOk(isLoopback(parseIp('128.0.0.1')!));
});
