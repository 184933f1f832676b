// ipFamily must accept exactly what node:net's isIP accepts (the oracle): hand-picked edge cases, then
// random strings over the characters addresses are made of.
import t from 'tap';
import { isIP } from 'node:net';
import { ipFamily, useRegexFreeNetChecks } from '../../src/lib/ip';

const cases = [
  '',
  '1.2.3.4',
  '0.0.0.0',
  '255.255.255.255',
  '256.1.1.1',
  '01.2.3.4',
  '1.2.3',
  '1.2.3.4.5',
  '1..2.3',
  '1.2.3.4 ',
  '::',
  '::1',
  '1::',
  '1:2:3:4:5:6:7:8',
  '1:2:3:4:5:6:7:8:9',
  '1:2:3:4:5:6:7::',
  '::1:2:3:4:5:6:7',
  '1:2:3:4:5:6::7:8',
  '1::2::3',
  ':::',
  '1:::2',
  'fe80::1%eth0',
  'fe80::1%',
  'fe80::1%e%0',
  '::ffff:1.2.3.4',
  '::1.2.3.4',
  '1:2:3:4:5:6:1.2.3.4',
  '1:2:3:4:5:6:7:1.2.3.4',
  '1.2.3.4::',
  '::1.2.3',
  'abcd::12345',
  'g::1',
  '[::1]',
  '::ffff:01.2.3.4',
  '1:2:3:4:5::1.2.3.4',
  ':1:2:3:4:5:6:7',
  '1:2:3:4:5:6:7:',
  'fe80::1%eth0.5',
  'fe80::1%a:b',
  '0:0:0:0:0:0:0:0',
  'FFFF::',
  '1.2.3.4%eth0',
];

t.test('hand-picked literals: the same verdict as node:net', async (t) => {
  for (const c of cases) t.equal(ipFamily(c), isIP(c), JSON.stringify(c));
});

t.test('random strings: the same verdict as node:net', async (t) => {
  // A seeded generator, so a failure can be replayed.
  let seed = 20261126;
  const rnd = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const alphabet = ['0', '1', '9', 'a', 'f', 'F', 'g', ':', ':', ':', '.', '.', '%', '2', '5', '255', '01', '::', 'ffff'];
  let mismatches = 0;
  for (let i = 0; i < 200_000; i++) {
    let s = '';
    const len = 1 + rnd(14);
    for (let j = 0; j < len; j++) s += alphabet[rnd(alphabet.length)];
    if (ipFamily(s) !== isIP(s)) {
      mismatches++;
      if (mismatches < 10) t.fail(`${JSON.stringify(s)}: ours ${ipFamily(s)}, node:net ${isIP(s)}`);
    }
  }
  t.equal(mismatches, 0, 'no mismatch in 200 000 random strings');
});

t.test('useRegexFreeNetChecks: node:net-shaped checks give the same verdicts after the swap', async (t) => {
  const net = await import('node:net');
  // A copy of the module's shape, so the process-wide node:net of the other tests stays as it is.
  const original = { isIP: net.isIP, isIPv4: net.isIPv4, isIPv6: net.isIPv6 };
  const swapped = { ...original };
  useRegexFreeNetChecks(swapped);
  t.not(swapped.isIPv6, original.isIPv6, 'replaced');
  for (const c of [...cases, 'istiod.mesh-system.svc', 'localhost']) {
    t.equal(swapped.isIP(c), original.isIP(c), `isIP ${JSON.stringify(c)}`);
    t.equal(swapped.isIPv4(c), original.isIPv4(c), `isIPv4 ${JSON.stringify(c)}`);
    t.equal(swapped.isIPv6(c), original.isIPv6(c), `isIPv6 ${JSON.stringify(c)}`);
  }
  // Node's checks take anything and test its string form.
  for (const v of [undefined, null, 1234, { toString: () => '::1' }]) {
    t.equal(swapped.isIP(v as unknown as string), original.isIP(v as unknown as string), `isIP(${String(v)})`);
  }
});
