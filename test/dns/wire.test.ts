// The DNS wire codec against byte layouts written out from RFC 1035 §4 (header, question, compression
// pointers), RFC 3596 (AAAA) and RFC 6891 (OPT), and truncation as miekg/dns does it for Istio's proxy
// (Istio's dns_test "large request truncated": 64 A records for `aaaaaaaaaaaa.aaaaaa.` fit 29 to a 512-byte answer).
import t from 'tap';
import {
  aRecord,
  aaaaRecord,
  cnameRecord,
  decodeMessage,
  encodeMessage,
  encodeName,
  formatIpv6,
  ipv6Bytes,
  query,
  recordValue,
  replyTo,
  TYPE,
} from '../../src/dns/wire';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const label = (s: string) => Buffer.concat([Buffer.from([s.length]), Buffer.from(s)]).toString('hex');

t.test('a query is a header, one question, no records (RFC 1035 §4.1)', async (t) => {
  const q = encodeMessage(query(0x1234, 'example.com.', TYPE.A));
  // id 1234, flags RD (0x0100), qdcount 1, an/ns/ar 0; name; type A; class IN
  t.same(q.toString('hex'), `123401000001000000000000${label('example')}${label('com')}00` + '00010001');
  const withEdns = encodeMessage(query(7, 'a.', TYPE.AAAA, { udpSize: 4096 }));
  // arcount 1; OPT: root name, type 41, class = payload size 4096, ttl 0, rdlength 0
  t.same(withEdns.toString('hex'), `000701000001000000000001${label('a')}00001c0001` + '00' + '0029' + '1000' + '00000000' + '0000');
});

t.test('answers reuse names through compression pointers', async (t) => {
  const req = decodeMessage(encodeMessage(query(1, 'www.example.com.', TYPE.A)));
  const r = replyTo(req);
  r.header.authoritative = true;
  r.answers = [cnameRecord('www.example.com.', 'example.com.', 30), aRecord('example.com.', '1.2.3.4', 30)];
  const b = encodeMessage(r);
  // header: QR AA RD → 0x8500; question at offset 12; "example.com." starts at 16
  t.same(b.subarray(0, 12).toString('hex'), '000185000001000200000000');
  const answers = b.subarray(12 + 17 + 4);
  // CNAME: owner → pointer to 12; rdata "example.com." → pointer to 16 (2 bytes)
  t.same(answers.subarray(0, 12).toString('hex'), 'c00c' + '0005' + '0001' + '0000001e' + '0002');
  t.same(answers.subarray(12, 14).toString('hex'), 'c010');
  // A: owner → pointer to 16; 4 bytes of address
  t.same(answers.subarray(14).toString('hex'), 'c010' + '0001' + '0001' + '0000001e' + '0004' + '01020304');
  const back = decodeMessage(b);
  t.same(
    back.answers.map((a) => [a.name, a.type, recordValue(a)]),
    [
      ['www.example.com.', TYPE.CNAME, 'example.com.'],
      ['example.com.', TYPE.A, '1.2.3.4'],
    ],
  );
});

t.test('decoding follows pointers and rejects what is broken', async (t) => {
  // a response whose answer name is a pointer to the question, AAAA 2001:db8::1
  const msg = hex(`abcd 8180 0001 0001 0000 0000 ${label('v6')}00 001c 0001 c00c 001c 0001 0000003c 0010 20010db8000000000000000000000001`);
  const m = decodeMessage(msg);
  t.equal(m.header.id, 0xabcd);
  t.ok(m.header.response && m.header.recursionDesired && m.header.recursionAvailable);
  t.same(m.questions, [{ name: 'v6.', type: TYPE.AAAA, class: 1 }]);
  t.equal(recordValue(m.answers[0]!), '2001:db8::1');
  t.equal(m.answers[0]!.ttl, 60);
  t.throws(() => decodeMessage(hex('abcd 0100 0001')), { name: 'DnsWireError' }, 'shorter than a header');
  t.throws(() => decodeMessage(hex('abcd 0100 0001 0000 0000 0000 c00c 0001 0001')), { name: 'DnsWireError' }, 'pointer loop');
  t.throws(() => decodeMessage(hex(`abcd 0100 0001 0000 0000 0000 ${label('abc').slice(0, 4)}`)), { name: 'DnsWireError' }, 'label past the end');
});

t.test('names and addresses', async (t) => {
  t.same(encodeName('.').toString('hex'), '00');
  t.same(encodeName('a\\.b.c.').toString('hex'), `03612e62${label('c')}00`, 'escaped dot stays in its label');
  t.throws(() => encodeName(`${'x'.repeat(64)}.`), { name: 'DnsWireError' });
  const ipv6Cases: Array<[string, string]> = [
    ['2001:db8:0:0:0:ff00:42:8329', '2001:db8::ff00:42:8329'],
    ['::1', '::1'],
    ['2001:2::', '2001:2::'],
    ['1:0:0:1:0:0:0:1', '1:0:0:1::1'],
  ];
  for (const [ip, text] of ipv6Cases) t.equal(formatIpv6(ipv6Bytes(ip)), text, ip);
  t.same(ipv6Bytes('::ffff:1.2.3.4').toString('hex'), '00000000000000000000ffff01020304', 'an IPv4 tail');
  t.same(aaaaRecord('x.', '2001:db8::1', 5).data.toString('hex'), '20010db8000000000000000000000001');
});

t.test('truncation keeps what fits and sets TC (miekg Msg.Truncate)', async (t) => {
  const req = decodeMessage(encodeMessage(query(9, 'aaaaaaaaaaaa.aaaaaa.', TYPE.A)));
  const giant = replyTo(req);
  for (let i = 0; i < 64; i++) giant.answers.push(aRecord('aaaaaaaaaaaa.aaaaaa.', `240.0.0.${i}`, 30));
  const full = decodeMessage(encodeMessage(giant));
  t.equal(full.answers.length, 64);
  t.notOk(full.header.truncated);
  const cut = encodeMessage(giant, 512);
  t.ok(cut.length <= 512, `${cut.length} bytes`);
  const m = decodeMessage(cut);
  t.equal(m.answers.length, 29, "Istio's giantResponse[:29]");
  t.ok(m.header.truncated, 'TC set');
  t.same(
    m.answers.map(recordValue),
    Array.from({ length: 29 }, (_, i) => `240.0.0.${i}`),
  );
  // an OPT record is kept and its room reserved: 11 + 8 bytes leave room for 28 records (12+25+28·16 = 485 ≤ 493)
  const withOpt = { ...giant, additionals: [{ name: '.', type: TYPE.OPT, class: 1232, ttl: 0, data: Buffer.alloc(8) }] };
  const b2 = encodeMessage(withOpt, 512);
  const m2 = decodeMessage(b2);
  t.equal(m2.additionals.length, 1);
  t.equal(m2.answers.length, 28, 'one record less for the OPT record');
  t.ok(b2.length <= 512);
});
