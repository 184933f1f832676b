// The agent's DNS proxy over real UDP and TCP sockets, with the name table and cases of Istio 1.26.8's
// pkg/dns/client/dns_test.go (TestDNS, TestBuildAlternateHosts; registry `Kubernetes` kept where Istio's test
// has it: the agent accepts it beside mesh's `Orchestrator`), an upstream resolver of the test's own, and
// node's resolver (c-ares) as a second, independent client.
import * as dgram from 'node:dgram';
import * as fs from 'node:fs';
import * as net from 'node:net';
import { Resolver } from 'node:dns/promises';
import path from 'node:path';
import t, { type Test } from 'tap';
import { forEachEntryNames, type NameEntry } from '../../src/dns/lookup-table';
import { LocalDnsServer, type Protocol } from '../../src/dns/server';
import {
  aaaaRecord,
  aRecord,
  cnameRecord,
  decodeMessage,
  encodeMessage,
  query,
  RCODE,
  recordValue,
  replyTo,
  TYPE,
  type Message,
  type ResourceRecord,
} from '../../src/dns/wire';
import { metricsText } from '../../src/lib/metrics';
import { metricValue } from '../helpers/prometheus';
import { tempDir } from '../helpers/temp';
import { mutate, seededRandom } from '../helpers/seeded-random.mjs';

const TABLE: Record<string, NameEntry> = {
  'www.google.com': { ips: ['1.1.1.1'], registry: 'External' },
  'productpage.ns1.svc.cluster.local': { ips: ['9.9.9.9'], registry: 'Kubernetes', namespace: 'ns1', shortname: 'productpage' },
  'example.ns2.svc.cluster.local': { ips: ['10.10.10.10'], registry: 'Kubernetes', namespace: 'ns2', shortname: 'example' },
  'details.ns2.svc.cluster.remote': {
    ips: ['11.11.11.11', '12.12.12.12', '13.13.13.13', '14.14.14.14'],
    registry: 'Kubernetes',
    namespace: 'ns2',
    shortname: 'details',
  },
  'svc-with-alt.ns1.svc.cluster.local': {
    ips: ['15.15.15.15'],
    registry: 'Kubernetes',
    namespace: 'ns1',
    shortname: 'svc-with-alt',
    altHosts: ['svc-with-alt.ns1.svc.clusterset.local'],
  },
  'ipv6.localhost': { ips: ['2001:db8:0:0:0:ff00:42:8329'], registry: 'External' },
  'dual.localhost': { ips: ['2.2.2.2', '2001:db8:0:0:0:ff00:42:8329'], registry: 'External' },
  'ipv4.localhost': { ips: ['2.2.2.2'], registry: 'External' },
  '*.b.wildcard': { ips: ['11.11.11.11'], registry: 'External' },
  '*.wildcard': { ips: ['10.10.10.10'], registry: 'External' },
  '*.svc.mesh.company.net': { ips: ['10.1.2.3'], registry: 'External' },
  'example.localhost.': { ips: ['3.3.3.3'], registry: 'External' },
};
const SEARCH = 'search ns1.svc.cluster.local svc.cluster.local cluster.local\n';
const GIANT = Array.from({ length: 64 }, (_, i) => aRecord('aaaaaaaaaaaa.aaaaaa.', `240.0.0.${i}`, 30));

/** Istio's makeUpstream: www.bing.com. → 1.1.1.1, giant. → 64 records, giant-tc. → cut to 512 bytes, the rest NXDOMAIN. */
async function startUpstream(t: Test): Promise<{ address: string; queries: string[] }> {
  const queries: string[] = [];
  const answer = (buf: Buffer, protocol: Protocol): Buffer => {
    const req = decodeMessage(buf);
    const name = req.questions[0]!.name;
    queries.push(`${protocol} ${name}`);
    const r = replyTo(req);
    if (name === 'www.bing.com.') r.answers = [aRecord(name, '1.1.1.1', 30)];
    else if (name === 'giant.' || name === 'giant-tc.') r.answers = GIANT;
    else r.header.rcode = RCODE.NXDOMAIN;
    return encodeMessage(r, name === 'giant-tc.' ? 512 : 65535);
  };
  // One port number for UDP and TCP, as a resolver has: a UDP port from the kernel whose TCP twin may be
  // taken by another test, so try again until both are free.
  for (let attempt = 0; ; attempt++) {
    const udp = dgram.createSocket('udp4');
    await new Promise<void>((r) => udp.bind(0, '127.0.0.1', () => r()));
    const port = udp.address().port;
    udp.on('message', (m, rinfo) => udp.send(answer(m, 'udp'), rinfo.port, rinfo.address));
    const tcp = net.createServer((s) => {
      s.on('data', (d) => {
        const out = answer(d.subarray(2, 2 + d.readUInt16BE(0)), 'tcp');
        const head = Buffer.alloc(2);
        head.writeUInt16BE(out.length);
        s.end(Buffer.concat([head, out]));
      });
    });
    const listened = await new Promise<boolean>((r) => {
      tcp.once('error', (e: NodeJS.ErrnoException) => {
        if (e.code === 'EADDRINUSE' && attempt < 20) r(false);
        else throw e;
      });
      tcp.listen(port, '127.0.0.1', () => r(true));
    });
    if (!listened) {
      udp.close();
      continue;
    }
    t.teardown(() => {
      udp.close();
      tcp.close();
    });
    return { address: `127.0.0.1:${port}`, queries };
  }
}

async function ask(protocol: Protocol, server: string, m: Message): Promise<Message> {
  const [host, port] = [server.slice(0, server.lastIndexOf(':')), Number(server.slice(server.lastIndexOf(':') + 1))];
  const q = encodeMessage(m);
  if (protocol === 'udp') {
    const s = dgram.createSocket('udp4');
    try {
      return await new Promise<Message>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('udp timeout')), 5000);
        s.on('message', (b) => {
          clearTimeout(timer);
          resolve(decodeMessage(b));
        });
        s.send(q, port, host);
      });
    } finally {
      s.close();
    }
  }
  return new Promise((resolve, reject) => {
    const c = net.connect(port, host);
    let buf = Buffer.alloc(0);
    c.on('connect', () => {
      const head = Buffer.alloc(2);
      head.writeUInt16BE(q.length);
      c.write(Buffer.concat([head, q]));
    });
    c.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        c.destroy();
        resolve(decodeMessage(buf.subarray(2, 2 + buf.readUInt16BE(0))));
      }
    });
    c.on('error', reject);
  });
}

const A = (name: string, ...ips: string[]) => ips.map((ip) => aRecord(name, ip, 30));
const AAAA = (name: string, ...ips: string[]) => ips.map((ip) => aaaaRecord(name, ip, 30));
const CNAME = (name: string, target: string) => [cnameRecord(name, target, 30)];
const show = (rs: readonly ResourceRecord[]) => rs.map((r) => `${r.name} ${r.ttl} ${r.class} ${r.type} ${recordValue(r)}`);

interface Case {
  name: string;
  host: string;
  aaaa?: boolean;
  want?: ResourceRecord[];
  rcode?: number;
  upstream?: boolean;
  unordered?: boolean;
  udpSize?: number;
  only?: Protocol;
  truncated?: boolean;
}

const CASES: Case[] = [
  { name: 'non k8s host in local cache', host: 'www.google.com.', want: A('www.google.com.', '1.1.1.1') },
  {
    name: 'non k8s host with search namespace yields cname+A record',
    host: 'www.google.com.ns1.svc.cluster.local.',
    want: [...CNAME('www.google.com.ns1.svc.cluster.local.', 'www.google.com.'), ...A('www.google.com.', '1.1.1.1')],
  },
  { name: 'non k8s host not in local cache', host: 'www.bing.com.', upstream: true, want: A('www.bing.com.', '1.1.1.1') },
  { name: 'k8s host - fqdn', host: 'productpage.ns1.svc.cluster.local.', want: A('productpage.ns1.svc.cluster.local.', '9.9.9.9') },
  { name: 'k8s host - name.namespace', host: 'productpage.ns1.', want: A('productpage.ns1.', '9.9.9.9') },
  { name: 'k8s host - shortname', host: 'productpage.', want: A('productpage.', '9.9.9.9') },
  {
    name: 'k8s host (name.namespace) with search namespace yields cname+A record',
    host: 'productpage.ns1.ns1.svc.cluster.local.',
    want: [...CNAME('productpage.ns1.ns1.svc.cluster.local.', 'productpage.ns1.'), ...A('productpage.ns1.', '9.9.9.9')],
  },
  {
    name: 'AAAA query for IPv4 k8s host (name.namespace) with search namespace',
    host: 'productpage.ns1.ns1.svc.cluster.local.',
    aaaa: true,
    want: [],
  },
  { name: 'k8s host - non local namespace - name.namespace', host: 'example.ns2.', want: A('example.ns2.', '10.10.10.10') },
  { name: 'k8s host - non local namespace - fqdn', host: 'example.ns2.svc.cluster.local.', want: A('example.ns2.svc.cluster.local.', '10.10.10.10') },
  { name: 'k8s host - non local namespace - name.namespace.svc', host: 'example.ns2.svc.', want: A('example.ns2.svc.', '10.10.10.10') },
  { name: 'failure: k8s host - non local namespace - shortname', host: 'example.', upstream: true, rcode: RCODE.NXDOMAIN, want: [] },
  { name: 'alt host - name', host: 'svc-with-alt.', want: A('svc-with-alt.', '15.15.15.15') },
  { name: 'alt host - name.namespace', host: 'svc-with-alt.ns1.', want: A('svc-with-alt.ns1.', '15.15.15.15') },
  { name: 'alt host - name.namespace.svc', host: 'svc-with-alt.ns1.svc.', want: A('svc-with-alt.ns1.svc.', '15.15.15.15') },
  {
    name: 'alt host - name.namespace.svc.cluster.local',
    host: 'svc-with-alt.ns1.svc.cluster.local.',
    want: A('svc-with-alt.ns1.svc.cluster.local.', '15.15.15.15'),
  },
  {
    name: 'alt host - name.namespace.svc.clusterset.local',
    host: 'svc-with-alt.ns1.svc.clusterset.local.',
    want: A('svc-with-alt.ns1.svc.clusterset.local.', '15.15.15.15'),
  },
  {
    name: 'remote cluster k8s svc - same ns and different domain - fqdn',
    host: 'details.ns2.svc.cluster.remote.',
    unordered: true,
    want: A('details.ns2.svc.cluster.remote.', '11.11.11.11', '12.12.12.12', '13.13.13.13', '14.14.14.14'),
  },
  {
    name: 'failure: remote cluster k8s svc - same ns and different domain - name.namespace',
    host: 'details.ns2.',
    upstream: true,
    rcode: RCODE.NXDOMAIN,
    want: [],
  },
  { name: 'TypeA query returns A records only', host: 'dual.localhost.', want: A('dual.localhost.', '2.2.2.2') },
  { name: 'wild card returns A record correctly', host: 'foo.wildcard.', want: A('foo.wildcard.', '10.10.10.10') },
  { name: 'specific wild card returns A record correctly', host: 'a.b.wildcard.', want: A('a.b.wildcard.', '11.11.11.11') },
  {
    name: 'wild card with search namespace chained pointer correctly',
    host: 'foo.wildcard.ns1.svc.cluster.local.',
    want: [...CNAME('foo.wildcard.ns1.svc.cluster.local.', '*.wildcard.'), ...A('*.wildcard.', '10.10.10.10')],
  },
  { name: 'wild card with domain returns A record correctly', host: 'foo.svc.mesh.company.net.', want: A('foo.svc.mesh.company.net.', '10.1.2.3') },
  {
    name: 'wild card with namespace with domain returns A record correctly',
    host: 'foo.foons.svc.mesh.company.net.',
    want: A('foo.foons.svc.mesh.company.net.', '10.1.2.3'),
  },
  {
    name: 'wild card with search domain returns A record correctly',
    host: 'foo.svc.mesh.company.net.ns1.svc.cluster.local.',
    want: [...CNAME('foo.svc.mesh.company.net.ns1.svc.cluster.local.', '*.svc.mesh.company.net.'), ...A('*.svc.mesh.company.net.', '10.1.2.3')],
  },
  {
    name: 'TypeAAAA query returns AAAA records only',
    host: 'dual.localhost.',
    aaaa: true,
    want: AAAA('dual.localhost.', '2001:db8:0:0:0:ff00:42:8329'),
  },
  { name: 'empty NOERROR if only AAAA records exist for typeA', host: 'ipv6.localhost.', rcode: RCODE.NOERROR, want: [] },
  { name: 'empty NOERROR if only A records exist for typeAAAA', host: 'ipv4.localhost.', aaaa: true, rcode: RCODE.NOERROR, want: [] },
  // Istio answers SERVFAIL here (its UDP client cannot read the big answer); this proxy reads it and cuts it
  // to 512 bytes with TC set, so the client retries over TCP.
  { name: 'udp: large request', host: 'giant.', only: 'udp', upstream: true, truncated: true, want: GIANT.slice(0, 29) },
  { name: 'tcp: large request', host: 'giant.', only: 'tcp', upstream: true, want: GIANT },
  { name: 'large request edns', host: 'giant.', upstream: true, udpSize: 65535, want: GIANT },
  { name: 'large request truncated', host: 'giant-tc.', only: 'udp', upstream: true, truncated: true, want: GIANT.slice(0, 29) },
  { name: 'hostname with a period', host: 'example.localhost.', want: A('example.localhost.', '3.3.3.3') },
];

t.test('alternate hosts (Istio TestBuildAlternateHosts)', async (t) => {
  const names = new Set(Object.keys(TABLE));
  forEachEntryNames(TABLE, { namespace: 'ns1', domain: 'ns1.svc.cluster.local', search: [] }, (alt) => alt.forEach((n) => names.add(n)));
  const starting = (p: string) => [...names].filter((n) => n.startsWith(p)).sort();
  t.same(starting('www.google.com'), ['www.google.com', 'www.google.com.']);
  t.same(starting('example'), [
    'example.localhost.',
    'example.ns2.',
    'example.ns2.svc.',
    'example.ns2.svc.cluster.local',
    'example.ns2.svc.cluster.local.',
  ]);
  t.same(starting('details'), ['details.ns2.svc.cluster.remote', 'details.ns2.svc.cluster.remote.']);
  t.same(starting('productpage'), [
    'productpage.',
    'productpage.ns1.',
    'productpage.ns1.svc.',
    'productpage.ns1.svc.cluster.local',
    'productpage.ns1.svc.cluster.local.',
  ]);
  t.same(starting('svc-with-alt'), [
    'svc-with-alt.',
    'svc-with-alt.ns1.',
    'svc-with-alt.ns1.svc.',
    'svc-with-alt.ns1.svc.cluster.local',
    'svc-with-alt.ns1.svc.cluster.local.',
    'svc-with-alt.ns1.svc.clusterset.local.',
  ]);
  t.same(starting('*.wildcard'), ['*.wildcard', '*.wildcard.']);
  t.same(starting('example.localhost.'), ['example.localhost.']);
});

for (const parallel of [false, true]) {
  t.test(`DNS proxy answers and forwards (Istio TestDNS${parallel ? 'ForwardParallel' : ''})`, async (t) => {
    const up = await startUpstream(t);
    const dir = tempDir(t, 'mesh-dns-');
    const resolv = path.join(dir, 'resolv.conf');
    fs.writeFileSync(resolv, `nameserver 192.0.2.1\n${SEARCH}`);
    const dns = new LocalDnsServer({
      address: '127.0.0.1:0',
      proxyNamespace: 'ns1',
      proxyDomain: 'ns1.svc.cluster.local',
      forwardParallel: parallel,
      resolvConfPath: resolv,
      upstreams: [up.address],
    });
    await dns.start();
    t.teardown(() => dns.close());
    const addr = (p: Protocol) =>
      dns
        .addresses()
        .find((a) => a.startsWith(`${p}://`))!
        .slice(6);

    // before the first name table: SERVFAIL, nothing asked upstream
    const early = await ask('udp', addr('udp'), query(1, 'www.bing.com.', TYPE.A));
    t.equal(early.header.rcode, RCODE.SERVFAIL, 'SERVFAIL before the name table arrives');
    t.notOk(dns.ready());
    dns.updateNameTable(TABLE);
    t.ok(dns.ready());

    const before = await metricsText();
    let id = 100;
    let local = 0;
    let forwarded = 0;
    for (const protocol of ['udp', 'tcp'] as const) {
      for (const c of CASES) {
        if (c.only && c.only !== protocol) continue;
        const res = await ask(protocol, addr(protocol), query(++id, c.host, c.aaaa ? TYPE.AAAA : TYPE.A, { udpSize: c.udpSize }));
        if (c.upstream) forwarded++;
        else local++;
        const label = `${protocol}-${c.name}`;
        t.equal(res.header.id, id, `${label}: id`);
        t.equal(res.header.rcode, c.rcode ?? RCODE.NOERROR, `${label}: rcode`);
        t.equal(res.header.truncated, c.truncated ?? false, `${label}: TC`);
        if (!c.upstream) t.ok(res.header.authoritative, `${label}: authoritative`);
        const got = show(res.answers);
        const want = show(c.want ?? []);
        t.same(c.unordered ? got.sort() : got, c.unordered ? want.sort() : want, `${label}: answers`);
      }
    }
    const after = await metricsText();
    const delta = (n: string) => (metricValue(after, n) ?? 0) - (metricValue(before, n) ?? 0);
    t.equal(delta('dns_requests_total'), local + forwarded, 'dns_requests_total counts every request');
    t.equal(delta('dns_upstream_requests_total'), forwarded, 'dns_upstream_requests_total counts the forwarded ones');
    t.equal(delta('dns_upstream_failures_total'), 0);
    t.equal(delta('dns_upstream_request_duration_seconds_count'), forwarded);
    t.equal(up.queries.filter((q) => q.endsWith(' www.bing.com.')).length, 2, 'upstream asked over the protocol the client used');
    t.ok(up.queries.includes('tcp www.bing.com.') && up.queries.includes('udp www.bing.com.'));

    // an independent client: node's resolver (c-ares), which walks no search list
    const r = new Resolver();
    r.setServers([addr('udp')]);
    t.same(await r.resolve4('productpage.ns1.svc.cluster.local'), ['9.9.9.9']);
    t.same(await r.resolve4('www.bing.com'), ['1.1.1.1']);
    t.same(await r.resolve6('dual.localhost'), ['2001:db8::ff00:42:8329']);
    await t.rejects(r.resolve4('nothing.example'), { code: 'ENOTFOUND' }, 'NXDOMAIN from upstream passes through');
  });
}

t.test('every upstream down: SERVFAIL, counted as a failure', async (t) => {
  const dir = tempDir(t, 'mesh-dns-');
  const resolv = path.join(dir, 'resolv.conf');
  fs.writeFileSync(resolv, 'nameserver 127.0.0.1\n');
  // a port nothing answers on (UDP: the query is refused by ICMP or times out)
  const dns = new LocalDnsServer({
    address: '127.0.0.1:0',
    proxyNamespace: 'ns1',
    proxyDomain: 'ns1.svc.cluster.local',
    forwardParallel: false,
    resolvConfPath: resolv,
    upstreams: ['127.0.0.1:9'],
    upstreamTimeoutMs: 300,
  });
  await dns.start();
  t.teardown(() => dns.close());
  dns.updateNameTable({});
  const before = metricValue(await metricsText(), 'dns_upstream_failures_total') ?? 0;
  const res = await ask('udp', dns.addresses()[0]!.slice(6), query(5, 'www.example.com.', TYPE.A));
  t.equal(res.header.rcode, RCODE.SERVFAIL);
  t.equal((metricValue(await metricsText(), 'dns_upstream_failures_total') ?? 0) - before, 1);
});

t.test('an upstream that cannot be reached at all: SERVFAIL at once, the next upstream still asked', async (t) => {
  const up = await startUpstream(t);
  const dir = tempDir(t, 'mesh-dns-');
  fs.writeFileSync(path.join(dir, 'r'), 'nameserver 127.0.0.1\n');
  // connect() to the broadcast address without SO_BROADCAST fails (EACCES) as a route-less one does (ENETUNREACH):
  // reported to connect's callback, not as an error event
  const start = async (upstreams: string[], forwardParallel: boolean) => {
    const dns = new LocalDnsServer({
      address: '127.0.0.1:0',
      proxyNamespace: 'ns1',
      proxyDomain: 'ns1.svc.cluster.local',
      forwardParallel,
      resolvConfPath: path.join(dir, 'r'),
      upstreams,
      upstreamTimeoutMs: 3000,
    });
    await dns.start();
    t.teardown(() => dns.close());
    dns.updateNameTable({});
    return dns;
  };
  for (const parallel of [false, true]) {
    const down = await start(['255.255.255.255:53'], parallel);
    const before = metricValue(await metricsText(), 'dns_upstream_failures_total') ?? 0;
    for (const protocol of ['udp', 'tcp'] as const) {
      const began = Date.now();
      const res = await ask(
        protocol,
        down
          .addresses()
          .find((a) => a.startsWith(protocol))!
          .slice(6),
        query(9, 'upstream-only.example.org.', TYPE.A),
      );
      t.equal(res.header.rcode, RCODE.SERVFAIL, `${protocol} parallel=${parallel}: SERVFAIL`);
      t.equal(res.header.id, 9);
      t.ok(Date.now() - began < 2500, `${protocol} parallel=${parallel}: answered before the upstream timeout`);
    }
    t.equal((metricValue(await metricsText(), 'dns_upstream_failures_total') ?? 0) - before, 2, 'counted as upstream failures');
    const mixed = await start(['255.255.255.255:53', up.address], parallel);
    const res = await ask('udp', mixed.addresses()[0]!.slice(6), query(10, 'www.bing.com.', TYPE.A));
    t.same(show(res.answers), show(A('www.bing.com.', '1.1.1.1')), `parallel=${parallel}: the reachable upstream answers`);
  }
});

t.test('what a client sends is accepted or refused as miekg/dns DefaultMsgAcceptFunc does', async (t) => {
  const dir = tempDir(t, 'mesh-dns-');
  fs.writeFileSync(path.join(dir, 'r'), 'nameserver 127.0.0.1\n');
  const dns = new LocalDnsServer({
    address: '127.0.0.1:0',
    proxyNamespace: 'a',
    proxyDomain: 'a.svc.cluster.local',
    forwardParallel: false,
    resolvConfPath: path.join(dir, 'r'),
    upstreams: [],
  });
  dns.updateNameTable({ 'known.example': { ips: ['10.0.0.1'], registry: 'External' } });
  const serve = async (m: Message | Buffer) => {
    const out = await dns.serve('udp', Buffer.isBuffer(m) ? m : encodeMessage(m));
    return out && decodeMessage(out);
  };
  const resp = query(1, 'x.', TYPE.A);
  resp.header.response = true;
  t.equal(await serve(resp), undefined, 'a response gets no answer');
  t.equal(await serve(Buffer.alloc(11)), undefined, 'no header, no answer');
  const update = query(2, 'x.', TYPE.SOA);
  update.header.opcode = 5;
  const notimp = (await serve(update))!;
  t.equal(notimp.header.rcode, RCODE.NOTIMP, 'UPDATE: not implemented');
  t.equal(notimp.header.opcode, 5, 'NOTIMP keeps the opcode');
  // NOTIFY passes the accept function: Istio's handler answers it as a query
  const notify = query(3, 'known.example.', TYPE.A);
  notify.header.opcode = 4;
  const notified = (await serve(notify))!;
  t.equal(notified.header.rcode, RCODE.NOERROR);
  t.same(notified.answers.map(recordValue), ['10.0.0.1'], 'NOTIFY for a mesh name answered from the table');
  const counts = (qd: number, an: number, ns: number, ar: number) => {
    const b = encodeMessage(query(4, 'known.example.', TYPE.A));
    [qd, an, ns, ar].forEach((n, i) => b.writeUInt16BE(n, 4 + i * 2));
    return b;
  };
  for (const [c, rcode] of [
    [[0, 0, 0, 0], RCODE.FORMERR],
    [[2, 0, 0, 0], RCODE.FORMERR],
    [[1, 2, 0, 0], RCODE.FORMERR],
    [[1, 0, 2, 0], RCODE.FORMERR],
    [[1, 0, 0, 3], RCODE.FORMERR],
    // accepted by the counts, then the records announced are missing: unpack error, FORMERR
    [[1, 1, 1, 2], RCODE.FORMERR],
  ] as Array<[[number, number, number, number], number]>) {
    const r = (await serve(counts(...c)))!;
    t.equal(r.header.rcode, rcode, `counts ${c.join('/')}`);
    t.equal(r.header.id, 4);
    t.same(r.questions, [], 'a rejected message is answered with its header only');
  }
  t.equal((await serve(counts(1, 0, 0, 0).subarray(0, 12)))!.header.rcode, RCODE.SERVFAIL, 'a bare header: no question, SERVFAIL (Istio)');
  const broken = encodeMessage(query(3, 'x.', TYPE.A)).subarray(0, 14);
  const formerr = (await serve(broken))!;
  t.equal(formerr.header.rcode, RCODE.FORMERR);
  t.equal(formerr.header.id, 3, 'with the id of the broken query');
});

t.test('fuzz: mutated queries and mutated upstream answers never break the proxy', async (t) => {
  const random = seededRandom(3101);
  // an upstream answering every query with a mutation of a valid answer carrying the query's id
  const answer = encodeMessage({
    ...replyTo(query(0, 'www.bing.com.', TYPE.A)),
    answers: [...A('www.bing.com.', '1.1.1.1', '1.1.1.2'), ...CNAME('www.bing.com.', 'bing.example.')],
  });
  const up = dgram.createSocket('udp4');
  await new Promise<void>((r) => up.bind(0, '127.0.0.1', () => r()));
  t.teardown(() => up.close());
  up.on('message', (m, rinfo) => {
    const out = mutate(answer, random);
    if (out.length >= 2) m.copy(out, 0, 0, 2);
    up.send(out, rinfo.port, rinfo.address);
  });
  const dir = tempDir(t, 'mesh-dns-');
  fs.writeFileSync(path.join(dir, 'r'), 'nameserver 127.0.0.1\n');
  const dns = new LocalDnsServer({
    address: '127.0.0.1:0',
    proxyNamespace: 'ns1',
    proxyDomain: 'ns1.svc.cluster.local',
    forwardParallel: false,
    resolvConfPath: path.join(dir, 'r'),
    upstreams: [`127.0.0.1:${up.address().port}`],
    upstreamTimeoutMs: 200,
  });
  dns.updateNameTable(TABLE);
  const valid = encodeMessage(query(77, 'www.bing.com.', TYPE.A, { udpSize: 1232 }));
  let answered = 0;
  for (let i = 0; i < 1500; i++) {
    const q = i % 3 === 0 ? valid : mutate(valid, random);
    for (const protocol of ['udp', 'tcp'] as const) {
      const out = await dns.serve(protocol, q);
      if (!out) continue;
      answered++;
      // whatever came in and whatever the upstream sent: a message a client can read, for the query's id
      const m = decodeMessage(out);
      if (m.header.id !== q.readUInt16BE(0)) t.fail(`answer ${m.header.id} to query ${q.readUInt16BE(0)}: ${q.toString('hex')}`);
      if (protocol === 'udp' && out.length > 1232) t.fail(`UDP answer of ${out.length} bytes`);
    }
  }
  t.ok(answered > 1000, `${answered} answers`);
  // and the proxy still answers properly once the upstream does
  up.removeAllListeners('message');
  up.on('message', (m, rinfo) =>
    up.send(encodeMessage({ ...replyTo(decodeMessage(m)), answers: A('www.bing.com.', '1.1.1.1') }), rinfo.port, rinfo.address),
  );
  const res = decodeMessage((await dns.serve('udp', valid))!);
  t.same(show(res.answers), show(A('www.bing.com.', '1.1.1.1')));
  t.same(
    show(decodeMessage((await dns.serve('udp', encodeMessage(query(78, 'productpage.', TYPE.A))))!).answers),
    show(A('productpage.', '9.9.9.9')),
  );
});

t.test('upstreams from resolv.conf: every valid nameserver on port 53, IPv6 in brackets', async (t) => {
  const dir = tempDir(t, 'mesh-dns-');
  fs.writeFileSync(
    path.join(dir, 'r'),
    '# kubelet\nnameserver 10.96.0.10\nnameserver fd00::a\nnameserver 10.96.0.11:5353\nnameserver fe80::1%lo\nsearch ns1.svc.cluster.local svc.cluster.local\noptions ndots:5\n',
  );
  const dns = new LocalDnsServer({
    address: '127.0.0.1:0',
    proxyNamespace: 'ns1',
    proxyDomain: 'ns1.svc.cluster.local',
    forwardParallel: false,
    resolvConfPath: path.join(dir, 'r'),
  });
  t.same(dns.upstreams, ['10.96.0.10:53', '[fd00::a]:53', '[fe80::1%lo]:53']);
  t.same(dns.search, ['ns1.svc.cluster.local', 'svc.cluster.local']);
});

t.test('configuration errors name the file and the address', async (t) => {
  t.throws(
    () =>
      new LocalDnsServer({
        address: 'localhost:15053',
        proxyNamespace: 'a',
        proxyDomain: 'a.svc.cluster.local',
        forwardParallel: false,
        resolvConfPath: '/nonexistent/resolv.conf',
      }),
    {
      message: /failed to load \/nonexistent\/resolv\.conf/,
    },
  );
  const dir = tempDir(t, 'mesh-dns-');
  fs.writeFileSync(path.join(dir, 'r'), 'nameserver 10.0.0.1\n');
  t.throws(
    () =>
      new LocalDnsServer({
        address: 'nope',
        proxyNamespace: 'a',
        proxyDomain: 'a.svc.cluster.local',
        forwardParallel: false,
        resolvConfPath: path.join(dir, 'r'),
      }),
    {
      message: /dns address must be a valid host:port: "nope"/,
    },
  );
});
