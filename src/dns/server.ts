// The agent's local DNS proxy (Istio 1.26 pkg/dns/client LocalDNSServer + dnsProxy): UDP and TCP servers on
// DNS_PROXY_ADDR (iptables sends the pod's DNS here when capture is on) answering the names of the mesh's
// name table, and forwarding every other question, unchanged, to the nameservers of /etc/resolv.conf over
// the protocol it came in on, returning their answer as it is (cut to what the client can take).
// What a client sends is accepted or refused as miekg/dns's server does for Istio (DefaultMsgAcceptFunc); an
// upstream that cannot be reached, times out or sends what does not decode is a failed exchange, as in miekg/dns's
// client, and when every upstream failed the client gets SERVFAIL. Differences on purpose: an upstream answer too
// big for the client is read whole and cut with TC set (Istio's client fails on it: SERVFAIL); a question without
// its type and class is FORMERR (miekg/dns reads it as type 0); nothing a client or an upstream sends may end the
// agent's process, which here also carries the pod's proxy.
import * as dgram from 'node:dgram';
import * as fs from 'node:fs';
import * as net from 'node:net';
import { isIPv4, isIPv6 } from '../discovery/host';
import { registerScope } from '../lib/log';
import { buildLookupTable, lookupHost, roundRobin, type LookupTable, type NameEntry } from './lookup-table';
import { dnsRequests, dnsUpstreamFailures, dnsUpstreamRequestDuration, dnsUpstreamRequests } from './metrics';
import { parseResolvConf } from './resolv-conf';
import {
  decodeHeader,
  decodeMessage,
  DnsWireError,
  ednsUdpSize,
  encodeMessage,
  HEADER_SIZE,
  headerCounts,
  MAX_MSG_SIZE,
  MIN_MSG_SIZE,
  OPCODE_NOTIFY,
  OPCODE_QUERY,
  RCODE,
  replyTo,
  type Header,
  type Message,
  type SectionCounts,
} from './wire';
import { joinHostPort, splitHostPort } from '../lib/hostport';

const log = registerScope('dns', 'mesh DNS proxy');

export const DEFAULT_DNS_PROXY_ADDR = 'localhost:15053';
/** Where a root agent listening on :53 (no capture rules: VMs, containers) finds the real resolvers. */
export const ALTERNATE_RESOLV_CONF = '/var/lib/mesh/resolv.conf';
/** Istio's upstream client: 5 s to dial, write and read. */
const UPSTREAM_TIMEOUT_MS = 5000;
/** How long a DNS-over-TCP connection may sit idle between queries. */
const TCP_IDLE_MS = 8000;

export type Protocol = 'udp' | 'tcp';

export interface LocalDnsServerOptions {
  /** DNS_PROXY_ADDR: `host:port`. */
  address: string;
  /** The proxy's namespace (POD_NAMESPACE) and DNS domain (`ns.svc.cluster.local`). */
  proxyNamespace: string;
  proxyDomain: string;
  /** DNS_FORWARD_PARALLEL: ask every upstream at once and take the first answer. */
  forwardParallel: boolean;
  /** Overrides /etc/resolv.conf (tests). */
  resolvConfPath?: string;
  /** Overrides the resolv.conf nameservers with `host:port` upstreams (tests: resolv.conf has no port). */
  upstreams?: string[];
  upstreamTimeoutMs?: number;
}

export class DnsConfigError extends Error {}

/** `host:port` → parts; IPv6 hosts in brackets. */
function hostAndPort(addr: string): { host: string; port: number } {
  let hp: { host: string; port: string };
  try {
    hp = splitHostPort(addr);
  } catch {
    hp = { host: '', port: '' };
  }
  if (!/^\d+$/.test(hp.port)) throw new DnsConfigError(`dns address must be a valid host:port: ${JSON.stringify(addr)}`);
  const port = Number(hp.port);
  if (port > 65535) throw new DnsConfigError(`dns address must be a valid host:port: ${JSON.stringify(addr)}: port out of range`);
  return { host: hp.host, port };
}

/** The largest answer a query may get (Istio's size(): the EDNS payload size over UDP, at least 512; 64 KiB over TCP). */
export function responseSize(protocol: Protocol, req: Message): number {
  if (protocol === 'tcp') return MAX_MSG_SIZE;
  return Math.max(ednsUdpSize(req) ?? 0, MIN_MSG_SIZE);
}

/** miekg/dns's answer to a message it rejects: the request's header turned into a response, no sections. */
function failure(header: Header, rcode: number): Buffer {
  return encodeMessage({
    header: { ...header, response: true, opcode: rcode === RCODE.NOTIMP ? header.opcode : OPCODE_QUERY, authoritative: false, zero: false, rcode },
    questions: [],
    answers: [],
    authorities: [],
    additionals: [],
  });
}

interface Listener {
  protocol: Protocol;
  address: string;
  close(): Promise<void>;
}

export class LocalDnsServer {
  private table: LookupTable | undefined;
  private names: Readonly<Record<string, NameEntry>> | undefined;
  private readonly listeners: Listener[] = [];
  private readonly tcpSockets = new Set<net.Socket>();
  readonly upstreams: string[];
  readonly search: string[];
  readonly respondBeforeSync: boolean;
  private readonly bindAddresses: string[];
  private readonly timeoutMs: number;

  constructor(private readonly o: LocalDnsServerOptions) {
    let addr = o.address || DEFAULT_DNS_PROXY_ADDR;
    let resolvConf = o.resolvConfPath ?? '/etc/resolv.conf';
    let respondBeforeSync = false;
    if (addr.endsWith(':53')) {
      if (process.getuid?.() === 0) {
        // Without capture rules nothing waits for the name table: answer from upstream until it arrives.
        respondBeforeSync = true;
        if (o.resolvConfPath === undefined && fs.existsSync(ALTERNATE_RESOLV_CONF)) resolvConf = ALTERNATE_RESOLV_CONF;
      } else {
        log.error(`DNS address ${addr} and not running as root, using the default ${DEFAULT_DNS_PROXY_ADDR}`);
        addr = DEFAULT_DNS_PROXY_ADDR;
      }
    }
    this.respondBeforeSync = respondBeforeSync;
    let text: string;
    try {
      text = fs.readFileSync(resolvConf, 'utf8');
    } catch (e) {
      throw new DnsConfigError(`failed to load ${resolvConf}: ${(e as Error).message}`);
    }
    const rc = parseResolvConf(text);
    for (const n of rc.notes) log.warn(`${resolvConf}:${n.line}: ${JSON.stringify(n.text)} ignored: ${n.reason}`);
    if (rc.servers.length === 0 && !o.upstreams) log.warn(`${resolvConf} names no nameserver: names outside the mesh are answered SERVFAIL`);
    // The application's resolver already walks the search list, one query per domain; the agent answers
    // or forwards each query as it is.
    this.upstreams = o.upstreams ?? rc.servers.map((s) => joinHostPort(s, rc.port));
    this.search = rc.search;
    const { host, port } = hostAndPort(addr);
    const v4 = rc.servers.some(isIPv4);
    const v6 = rc.servers.some((s) => isIPv6(s.split('%')[0]!));
    if (host === 'localhost' && (v4 || v6)) {
      // "localhost" binds one family; a dual-stack pod's resolvers may use either
      this.bindAddresses = [...(v4 ? [joinHostPort('127.0.0.1', port)] : []), ...(v6 ? [joinHostPort('::1', port)] : [])];
    } else {
      this.bindAddresses = [joinHostPort(host === 'localhost' ? '127.0.0.1' : host, port)];
    }
    this.timeoutMs = o.upstreamTimeoutMs ?? UPSTREAM_TIMEOUT_MS;
    log.debug('initialized DNS', {
      search: this.search.join(','),
      servers: this.upstreams.join(','),
      ndots: String(rc.options.ndots),
      unknown: rc.unknown.join(','),
    });
  }

  /** Binds UDP and TCP on every address; rejects (after closing what was bound) when one cannot be bound. */
  async start(): Promise<void> {
    try {
      for (const a of this.bindAddresses) {
        for (const protocol of ['udp', 'tcp'] as const) {
          log.info(`Starting local ${protocol} DNS server on ${a}`);
          this.listeners.push(protocol === 'udp' ? await this.listenUdp(a) : await this.listenTcp(a));
        }
      }
    } catch (e) {
      await this.close();
      throw e;
    }
  }

  /** Where the servers listen (`udp://127.0.0.1:15053`, …). */
  addresses(): string[] {
    return this.listeners.map((l) => `${l.protocol}://${l.address}`);
  }

  /** A new name table from the discovery daemon. */
  updateNameTable(table: Readonly<Record<string, NameEntry>>): void {
    const t = buildLookupTable(table, { namespace: this.o.proxyNamespace, domain: this.o.proxyDomain, search: this.search });
    this.table = t;
    this.names = table;
    log.debug(`updated lookup table with ${t.allHosts.size} hosts`);
  }

  /** Ready once the first name table arrived (the agent's readiness waits for it). */
  ready(): boolean {
    return this.table !== undefined;
  }

  nameTable(): Readonly<Record<string, NameEntry>> | undefined {
    return this.names;
  }

  async close(): Promise<void> {
    for (const s of this.tcpSockets) s.destroy();
    await Promise.all(this.listeners.splice(0).map((l) => l.close()));
  }

  // ---- serving ---------------------------------------------------------------------------------------

  /** One query in, one answer out (undefined: nothing to say to something that is not DNS). Never rejects. */
  async serve(protocol: Protocol, buf: Buffer): Promise<Buffer | undefined> {
    dnsRequests.inc();
    const h = decodeHeader(buf);
    // miekg/dns: no header, no answer ("any reply can be used to amplify"); responses are ignored
    if (!h || h.response) return undefined;
    const verdict = accept(h, headerCounts(buf)!);
    if (verdict !== undefined) return failure(h, verdict);
    try {
      // miekg/dns takes a bare header as a message without questions (Istio: SERVFAIL below)
      const req = buf.length === HEADER_SIZE ? { header: h, questions: [], answers: [], authorities: [], additionals: [] } : decodeMessage(buf);
      return await this.answer(protocol, req, buf);
    } catch (e) {
      if (e instanceof DnsWireError) {
        log.debug(`malformed ${protocol} request: ${e.message}`);
        return failure(h, RCODE.FORMERR);
      }
      log.error(`${protocol} DNS request ${h.id} failed: ${(e as Error).message}`);
      return failure(h, RCODE.SERVFAIL);
    }
  }

  private async answer(protocol: Protocol, req: Message, buf: Buffer): Promise<Buffer> {
    const size = responseSize(protocol, req);
    const q = req.questions[0];
    if (!q) return encodeMessage(replyTo(req, RCODE.SERVFAIL));
    const hostname = q.name.toLowerCase();
    const table = this.table;
    if (!table) {
      if (this.respondBeforeSync) return this.forward(protocol, req, buf, hostname, size);
      log.debug(`dns request for host ${JSON.stringify(hostname)} before lookup table is loaded`);
      return encodeMessage(replyTo(req, RCODE.SERVFAIL));
    }
    const { answers, found } = lookupHost(table, q.type, hostname);
    if (!found) return this.forward(protocol, req, buf, hostname, size);
    const reply = replyTo(req);
    // The mesh is the authority for its own names. No answer of the asked type is still NOERROR.
    reply.header.authoritative = true;
    reply.answers = answers.length > 0 ? roundRobin(answers) : [];
    log.debug(`response for hostname ${JSON.stringify(hostname)} (found=true): ${answers.length} records`);
    return encodeMessage(reply, size);
  }

  private async forward(protocol: Protocol, req: Message, raw: Buffer, hostname: string, size: number): Promise<Buffer> {
    dnsUpstreamRequests.inc();
    const start = process.hrtime.bigint();
    log.debug(`response for hostname ${JSON.stringify(hostname)} not found in dns proxy, querying upstream`);
    const answer = this.o.forwardParallel ? await this.queryParallel(protocol, raw) : await this.querySequential(protocol, raw);
    dnsUpstreamRequestDuration.observe(Number(process.hrtime.bigint() - start) / 1e9);
    if (!answer) {
      dnsUpstreamFailures.inc();
      return encodeMessage(replyTo(req, RCODE.SERVFAIL));
    }
    if (answer.raw.length <= size) return answer.raw;
    try {
      return encodeMessage(answer.message, size);
    } catch (e) {
      // the upstream's answer, not the client's query, is at fault: not FORMERR
      log.info(`upstream answer for ${JSON.stringify(hostname)} cannot be cut to ${size} bytes: ${(e as Error).message}`);
      dnsUpstreamFailures.inc();
      return encodeMessage(replyTo(req, RCODE.SERVFAIL));
    }
  }

  /** Upstreams in random order (Istio 1.26 spreads load so), the first answer wins. */
  private async querySequential(protocol: Protocol, raw: Buffer): Promise<Upstream | undefined> {
    const servers = [...this.upstreams];
    for (let i = servers.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [servers[i], servers[j]] = [servers[j]!, servers[i]!];
    }
    for (const s of servers) {
      try {
        return await exchange(protocol, s, raw, this.timeoutMs);
      } catch (e) {
        log.info(`upstream failure: ${(e as Error).message}`);
      }
    }
    return undefined;
  }

  private async queryParallel(protocol: Protocol, raw: Buffer): Promise<Upstream | undefined> {
    if (this.upstreams.length === 0) return undefined;
    return new Promise((resolve) => {
      let failed = 0;
      let done = false;
      for (const s of this.upstreams) {
        exchange(protocol, s, raw, this.timeoutMs).then(
          (b) => {
            if (!done) resolve(b);
            done = true;
          },
          (e: Error) => {
            log.info(`parallel querying upstream failure: ${e.message}`);
            if (++failed === this.upstreams.length && !done) {
              log.info('all upstream failed');
              done = true;
              resolve(undefined);
            }
          },
        );
      }
    });
  }

  // ---- listeners -------------------------------------------------------------------------------------

  private async listenUdp(address: string): Promise<Listener> {
    const { host, port } = hostAndPort(address);
    const sock = dgram.createSocket({ type: isIPv6(host) ? 'udp6' : 'udp4' });
    await new Promise<void>((resolve, reject) => {
      sock.once('error', (e) => reject(new Error(`Failed to listen on udp port ${address}: ${e.message}`)));
      sock.bind(port, host, () => resolve());
    });
    sock.on('error', (e) => log.error(`Local udp DNS server error: ${e.message}`));
    sock.on('message', (msg, rinfo) => {
      void this.serve('udp', msg).then((out) => {
        // a datagram from port 0 cannot be answered, and send() throws on it
        if (!out || rinfo.port === 0) return;
        try {
          sock.send(out, rinfo.port, rinfo.address);
        } catch (e) {
          log.debug(`cannot answer ${rinfo.address}:${rinfo.port}: ${(e as Error).message}`);
        }
      }, logUnexpected('udp'));
    });
    const a = sock.address();
    return {
      protocol: 'udp',
      address: joinHostPort(a.address, a.port),
      close: () => new Promise<void>((r) => sock.close(() => r())),
    };
  }

  private async listenTcp(address: string): Promise<Listener> {
    const { host, port } = hostAndPort(address);
    const server = net.createServer((s) => this.serveTcp(s));
    await new Promise<void>((resolve, reject) => {
      server.once('error', (e) => reject(new Error(`Failed to listen on tcp port ${address}: ${e.message}`)));
      server.listen(port, host, () => resolve());
    });
    const a = server.address() as net.AddressInfo;
    return {
      protocol: 'tcp',
      address: joinHostPort(a.address, a.port),
      close: () => new Promise<void>((r) => server.close(() => r())),
    };
  }

  /** DNS over TCP: two-byte length before each message, several queries per connection, answered in order. */
  private serveTcp(s: net.Socket): void {
    this.tcpSockets.add(s);
    s.setTimeout(TCP_IDLE_MS, () => s.destroy());
    s.on('close', () => this.tcpSockets.delete(s));
    s.on('error', () => s.destroy());
    let pending = Buffer.alloc(0);
    let chain = Promise.resolve();
    s.on('data', (d: Buffer) => {
      pending = Buffer.concat([pending, d]);
      while (pending.length >= 2) {
        const len = pending.readUInt16BE(0);
        if (pending.length < 2 + len) break;
        const msg = pending.subarray(2, 2 + len);
        pending = pending.subarray(2 + len);
        chain = chain
          .then(async () => {
            const out = await this.serve('tcp', Buffer.from(msg));
            if (!out || s.destroyed) return;
            const head = Buffer.alloc(2);
            head.writeUInt16BE(out.length);
            s.write(Buffer.concat([head, out]));
          })
          .catch(logUnexpected('tcp'));
      }
    });
  }
}

/** The last guard of a listener: what escapes it is a bug of the proxy, logged, never the end of the process. */
function logUnexpected(protocol: Protocol): (e: unknown) => void {
  return (e) => log.error(`${protocol} DNS request failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
}

/** An upstream's answer: as received, and decoded (an answer that does not decode is a failed exchange). */
export interface Upstream {
  raw: Buffer;
  message: Message;
}

/**
 * miekg/dns's DefaultMsgAcceptFunc, which Istio's server keeps: QUERY and NOTIFY only (else NOTIMP), exactly one
 * question, at most one answer, one authority and two additional records (else FORMERR). Undefined: accepted.
 */
function accept(h: Header, c: SectionCounts): number | undefined {
  if (h.opcode !== OPCODE_QUERY && h.opcode !== OPCODE_NOTIFY) return RCODE.NOTIMP;
  if (c.questions !== 1 || c.answers > 1 || c.authorities > 1 || c.additionals > 2) return RCODE.FORMERR;
  return undefined;
}

/** The answer decoded, or why it is no answer to query `id` (miekg/dns's client: short read, unpack error, id). */
function readAnswer(msg: Buffer, from: string): Upstream | Error {
  if (msg.length < HEADER_SIZE) return new Error(`${from}: short read (${msg.length} bytes)`);
  try {
    return { raw: msg, message: decodeMessage(msg) };
  } catch (e) {
    return new Error(`${from}: ${(e as Error).message}`);
  }
}

/** One query to one upstream over `protocol`: its answer, whose ID matches the query's. */
export async function exchange(protocol: Protocol, server: string, query: Buffer, timeoutMs: number): Promise<Upstream> {
  const { host, port } = hostAndPort(server);
  const id = query.readUInt16BE(0);
  return protocol === 'udp' ? exchangeUdp(host, port, query, id, timeoutMs) : exchangeTcp(host, port, query, id, timeoutMs);
}

function exchangeUdp(host: string, port: number, query: Buffer, id: number, timeoutMs: number): Promise<Upstream> {
  const to = joinHostPort(host, port);
  return new Promise((resolve, reject) => {
    // A socket per query: a fresh random source port each time, as the upstream client in Istio dials.
    const sock = dgram.createSocket({ type: isIPv6(host.split('%')[0]!) ? 'udp6' : 'udp4' });
    let settled = false;
    const done = (r: Upstream | Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.close();
      if (r instanceof Error) reject(r);
      else resolve(r);
    };
    const timer = setTimeout(() => done(new Error(`read udp ${to}: i/o timeout`)), timeoutMs);
    sock.on('error', (e) => done(new Error(`udp ${to}: ${e.message}`)));
    sock.on('message', (msg) => {
      // a connected socket hears only its upstream; an answer to another (earlier) query is skipped, as miekg/dns does
      if (msg.length >= HEADER_SIZE && msg.readUInt16BE(0) !== id) return;
      done(readAnswer(msg, `udp ${to}`));
    });
    try {
      // connect() reports an unreachable network or a refused address to its callback, not as an 'error'
      sock.connect(port, host, (err?: Error) => {
        if (err) done(new Error(`dial udp ${to}: ${err.message}`));
        else if (!settled) sock.send(query, (e) => e && done(new Error(`write udp ${to}: ${e.message}`)));
      });
    } catch (e) {
      done(new Error(`dial udp ${to}: ${(e as Error).message}`));
    }
  });
}

function exchangeTcp(host: string, port: number, query: Buffer, id: number, timeoutMs: number): Promise<Upstream> {
  const to = joinHostPort(host, port);
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    let settled = false;
    let s: net.Socket | undefined;
    const done = (r: Upstream | Error) => {
      if (settled) return;
      settled = true;
      s?.destroy();
      if (r instanceof Error) reject(r);
      else resolve(r);
    };
    try {
      s = net.connect({ host, port });
    } catch (e) {
      done(new Error(`dial tcp ${to}: ${(e as Error).message}`));
      return;
    }
    s.setTimeout(timeoutMs, () => done(new Error(`tcp ${to}: i/o timeout`)));
    s.on('error', (e) => done(new Error(`dial tcp ${to}: ${e.message}`)));
    s.on('connect', () => {
      const head = Buffer.alloc(2);
      head.writeUInt16BE(query.length);
      s!.write(Buffer.concat([head, query]));
    });
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length < 2) return;
      const len = buf.readUInt16BE(0);
      if (buf.length < 2 + len) return;
      const msg = Buffer.from(buf.subarray(2, 2 + len));
      if (msg.length >= HEADER_SIZE && msg.readUInt16BE(0) !== id) done(new Error(`tcp ${to}: id mismatch`));
      else done(readAnswer(msg, `tcp ${to}`));
    });
    s.on('end', () => done(new Error(`tcp ${to}: connection closed before an answer`)));
  });
}
