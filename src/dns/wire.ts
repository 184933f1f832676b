// The DNS wire format (RFC 1035, RFC 3596 AAAA, RFC 6891 OPT) as far as the agent's DNS proxy needs it:
// decoding queries and upstream answers (compressed names included), building answers, and truncating a
// message to what the client can take, as miekg/dns's Msg.Truncate does for Istio's proxy.
// Names are absolute, dot-terminated text (`reviews.default.svc.cluster.local.`); a label holding a dot, a
// backslash or a byte outside printable ASCII is written with `\.`, `\\` or `\DDD`, as miekg/dns and dig do.

export const TYPE = { A: 1, NS: 2, CNAME: 5, SOA: 6, PTR: 12, MX: 15, TXT: 16, AAAA: 28, SRV: 33, OPT: 41, IXFR: 251, AXFR: 252, ANY: 255 } as const;
export const CLASS_INET = 1;
export const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const;
export const OPCODE_QUERY = 0;
export const OPCODE_NOTIFY = 4;

/** The smallest payload every client takes (RFC 1035 / RFC 6891 §6.2.5). */
export const MIN_MSG_SIZE = 512;
/** The largest DNS message (DNS over TCP). */
export const MAX_MSG_SIZE = 65535;
export const HEADER_SIZE = 12;

export interface Header {
  id: number;
  /** QR: a response. */
  response: boolean;
  opcode: number;
  authoritative: boolean;
  truncated: boolean;
  recursionDesired: boolean;
  recursionAvailable: boolean;
  /** The Z bit (zero), AD and CD bits, kept as they came. */
  zero: boolean;
  authenticatedData: boolean;
  checkingDisabled: boolean;
  rcode: number;
}

export interface Question {
  name: string;
  type: number;
  class: number;
}

/**
 * A resource record. `data` is the record data with every embedded name expanded (no compression
 * pointers), so a record can be written into any message; recordValue() reads addresses and targets.
 */
export interface ResourceRecord {
  name: string;
  type: number;
  class: number;
  ttl: number;
  data: Buffer;
}

export interface Message {
  header: Header;
  questions: Question[];
  answers: ResourceRecord[];
  authorities: ResourceRecord[];
  additionals: ResourceRecord[];
}

export class DnsWireError extends Error {
  override name = 'DnsWireError';
}

// ---------------------------------------------------------------------------------------------
// names

function escapeLabel(label: Buffer): string {
  let s = '';
  for (const b of label) {
    if (b === 0x2e || b === 0x5c) s += `\\${String.fromCharCode(b)}`;
    else if (b > 0x20 && b < 0x7f) s += String.fromCharCode(b);
    else s += `\\${String(b).padStart(3, '0')}`;
  }
  return s;
}

/** `a.b.` → label buffers (the root name has none); throws on a label over 63 bytes or a name over 255. */
export function nameLabels(name: string): Buffer[] {
  if (name === '.' || name === '') return [];
  const labels: Buffer[] = [];
  let cur: number[] = [];
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c === 0x5c) {
      const d = name.slice(i + 1, i + 4);
      if (/^\d{3}$/.test(d)) {
        cur.push(Number(d));
        i += 3;
      } else if (i + 1 < name.length) {
        cur.push(name.charCodeAt(++i));
      }
    } else if (c === 0x2e) {
      if (cur.length === 0) throw new DnsWireError(`empty label in ${JSON.stringify(name)}`);
      labels.push(Buffer.from(cur));
      cur = [];
    } else {
      cur.push(c > 0xff ? 0x3f : c);
    }
  }
  if (cur.length > 0) labels.push(Buffer.from(cur));
  for (const l of labels) if (l.length > 63) throw new DnsWireError(`label longer than 63 bytes in ${JSON.stringify(name)}`);
  if (labels.reduce((n, l) => n + l.length + 1, 1) > 255) throw new DnsWireError(`name longer than 255 bytes: ${JSON.stringify(name)}`);
  return labels;
}

/** Reads a (possibly compressed) name at `offset`; returns it and the offset after it in place. */
function readName(buf: Buffer, offset: number): [string, number] {
  const labels: string[] = [];
  let pos = offset;
  let end = -1;
  let jumps = 0;
  let length = 1;
  for (;;) {
    if (pos >= buf.length) throw new DnsWireError('name runs past the end of the message');
    const len = buf[pos]!;
    if (len === 0) {
      pos++;
      break;
    }
    if ((len & 0xc0) === 0xc0) {
      if (pos + 1 >= buf.length) throw new DnsWireError('truncated compression pointer');
      if (++jumps > 64) throw new DnsWireError('compression pointer loop');
      const target = ((len & 0x3f) << 8) | buf[pos + 1]!;
      if (end < 0) end = pos + 2;
      if (target >= buf.length) throw new DnsWireError('compression pointer past the end of the message');
      pos = target;
      continue;
    }
    if ((len & 0xc0) !== 0) throw new DnsWireError(`unsupported label type 0x${len.toString(16)}`);
    if (pos + 1 + len > buf.length) throw new DnsWireError('label runs past the end of the message');
    length += len + 1;
    if (length > 255) throw new DnsWireError('name longer than 255 bytes');
    labels.push(escapeLabel(buf.subarray(pos + 1, pos + 1 + len)));
    pos += 1 + len;
  }
  return [labels.length === 0 ? '.' : `${labels.join('.')}.`, end >= 0 ? end : pos];
}

/** The uncompressed wire form of a name. */
export function encodeName(name: string): Buffer {
  const labels = nameLabels(name);
  return Buffer.concat([...labels.flatMap((l) => [Buffer.from([l.length]), l]), Buffer.from([0])]);
}

// ---------------------------------------------------------------------------------------------
// record data

/** Record types whose data holds names that may be compressed (RFC 3597 §4: only RFC 1035 types). */
function expandData(buf: Buffer, type: number, start: number, end: number): Buffer {
  const name = (at: number): [Buffer, number] => {
    const [n, next] = readName(buf, at);
    return [encodeName(n), next];
  };
  switch (type) {
    case TYPE.CNAME:
    case TYPE.NS:
    case TYPE.PTR: {
      const [n] = name(start);
      return n;
    }
    case TYPE.MX: {
      const [n] = name(start + 2);
      return Buffer.concat([buf.subarray(start, start + 2), n]);
    }
    case TYPE.SOA: {
      const [m, next] = name(start);
      const [r, rest] = name(next);
      if (rest + 20 > end) throw new DnsWireError('short SOA record');
      return Buffer.concat([m, r, buf.subarray(rest, rest + 20)]);
    }
    default:
      return Buffer.from(buf.subarray(start, end));
  }
}

/** Types whose data names may be written compressed (RFC 1035 ones, as above). */
const COMPRESSIBLE_DATA = new Set<number>([TYPE.CNAME, TYPE.NS, TYPE.PTR, TYPE.MX, TYPE.SOA]);

export function aRecord(name: string, ip: string, ttl: number): ResourceRecord {
  return { name, type: TYPE.A, class: CLASS_INET, ttl, data: Buffer.from(ip.split('.').map(Number)) };
}

export function aaaaRecord(name: string, ip: string, ttl: number): ResourceRecord {
  return { name, type: TYPE.AAAA, class: CLASS_INET, ttl, data: ipv6Bytes(ip) };
}

export function cnameRecord(name: string, target: string, ttl: number): ResourceRecord {
  return { name, type: TYPE.CNAME, class: CLASS_INET, ttl, data: encodeName(target) };
}

/** 16 bytes of an IPv6 literal (`::` and an embedded IPv4 tail allowed). */
export function ipv6Bytes(ip: string): Buffer {
  let s = ip.split('%')[0]!;
  const tail: number[] = [];
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (v4) {
    tail.push(...v4[1]!.split('.').map(Number));
    s = s.slice(0, -v4[1]!.length) + '0:0';
  }
  const [head, rest] = s.split('::') as [string, string | undefined];
  const groups = (x: string) => (x === '' ? [] : x.split(':').map((g) => parseInt(g, 16)));
  const h = groups(head);
  const r = rest === undefined ? [] : groups(rest);
  const all = rest === undefined ? h : [...h, ...new Array<number>(8 - h.length - r.length).fill(0), ...r];
  if (all.length !== 8 || all.some((g) => !(g >= 0 && g <= 0xffff))) throw new DnsWireError(`not an IPv6 address: ${ip}`);
  const out = Buffer.alloc(16);
  all.forEach((g, i) => out.writeUInt16BE(g, i * 2));
  if (tail.length === 4) Buffer.from(tail).copy(out, 12);
  return out;
}

/** RFC 5952 text of 16 address bytes: lower case, the longest run of two or more zero groups as `::`. */
export function formatIpv6(b: Buffer): string {
  const g: number[] = [];
  for (let i = 0; i < 16; i += 2) g.push(b.readUInt16BE(i));
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (xs: number[]) => xs.map((x) => x.toString(16)).join(':');
  if (best < 0) return hex(g);
  return `${hex(g.slice(0, best))}::${hex(g.slice(best + bestLen))}`;
}

/** The address of an A/AAAA record, the target of a CNAME/NS/PTR record; undefined for others. */
export function recordValue(r: ResourceRecord): string | undefined {
  if (r.type === TYPE.A && r.data.length === 4) return [...r.data].join('.');
  if (r.type === TYPE.AAAA && r.data.length === 16) return formatIpv6(r.data);
  if (r.type === TYPE.CNAME || r.type === TYPE.NS || r.type === TYPE.PTR) return readName(r.data, 0)[0];
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// decoding

function readHeader(buf: Buffer): Header {
  const flags = buf.readUInt16BE(2);
  return {
    id: buf.readUInt16BE(0),
    response: (flags & 0x8000) !== 0,
    opcode: (flags >> 11) & 0xf,
    authoritative: (flags & 0x0400) !== 0,
    truncated: (flags & 0x0200) !== 0,
    recursionDesired: (flags & 0x0100) !== 0,
    recursionAvailable: (flags & 0x0080) !== 0,
    zero: (flags & 0x0040) !== 0,
    authenticatedData: (flags & 0x0020) !== 0,
    checkingDisabled: (flags & 0x0010) !== 0,
    rcode: flags & 0xf,
  };
}

/** Decodes a whole message; throws DnsWireError on anything malformed. */
export function decodeMessage(buf: Buffer): Message {
  if (buf.length < HEADER_SIZE) throw new DnsWireError(`message of ${buf.length} bytes is shorter than a header`);
  const header = readHeader(buf);
  const counts = [4, 6, 8, 10].map((o) => buf.readUInt16BE(o)) as [number, number, number, number];
  let pos = HEADER_SIZE;
  const questions: Question[] = [];
  for (let i = 0; i < counts[0]; i++) {
    const [name, next] = readName(buf, pos);
    if (next + 4 > buf.length) throw new DnsWireError('question runs past the end of the message');
    questions.push({ name, type: buf.readUInt16BE(next), class: buf.readUInt16BE(next + 2) });
    pos = next + 4;
  }
  const section = (n: number): ResourceRecord[] => {
    const out: ResourceRecord[] = [];
    for (let i = 0; i < n; i++) {
      const [name, next] = readName(buf, pos);
      if (next + 10 > buf.length) throw new DnsWireError('record runs past the end of the message');
      const type = buf.readUInt16BE(next);
      const rdlen = buf.readUInt16BE(next + 8);
      const start = next + 10;
      if (start + rdlen > buf.length) throw new DnsWireError('record data runs past the end of the message');
      out.push({ name, type, class: buf.readUInt16BE(next + 2), ttl: buf.readUInt32BE(next + 4), data: expandData(buf, type, start, start + rdlen) });
      pos = start + rdlen;
    }
    return out;
  };
  const answers = section(counts[1]);
  const authorities = section(counts[2]);
  const additionals = section(counts[3]);
  return { header, questions, answers, authorities, additionals };
}

/** Only the header, for answering a message too broken to decode. */
export function decodeHeader(buf: Buffer): Header | undefined {
  return buf.length >= HEADER_SIZE ? readHeader(buf) : undefined;
}

export interface SectionCounts {
  questions: number;
  answers: number;
  authorities: number;
  additionals: number;
}

/** The section counts a header announces (whether or not the message holds that many). */
export function headerCounts(buf: Buffer): SectionCounts | undefined {
  if (buf.length < HEADER_SIZE) return undefined;
  return { questions: buf.readUInt16BE(4), answers: buf.readUInt16BE(6), authorities: buf.readUInt16BE(8), additionals: buf.readUInt16BE(10) };
}

// ---------------------------------------------------------------------------------------------
// encoding

/** Writes names with compression (RFC 1035 §4.1.4) into a growing buffer. */
class Writer {
  private buf = Buffer.alloc(512);
  length = 0;
  private readonly offsets = new Map<string, number>();

  private ensure(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }

  bytes(b: Buffer): void {
    this.ensure(b.length);
    b.copy(this.buf, this.length);
    this.length += b.length;
  }

  u16(v: number): void {
    this.ensure(2);
    this.buf.writeUInt16BE(v, this.length);
    this.length += 2;
  }

  u32(v: number): void {
    this.ensure(4);
    this.buf.writeUInt32BE(v >>> 0, this.length);
    this.length += 4;
  }

  setU16(at: number, v: number): void {
    this.buf.writeUInt16BE(v, at);
  }

  name(name: string, compress: boolean): void {
    const labels = nameLabels(name);
    for (let i = 0; i < labels.length; i++) {
      // suffixes compare case-insensitively, as DNS names do
      const key = labels
        .slice(i)
        .map((l) => l.toString('latin1').toLowerCase())
        .join('\u0000');
      const at = compress ? this.offsets.get(key) : undefined;
      if (at !== undefined) {
        this.u16(0xc000 | at);
        return;
      }
      if (this.length < 0x4000) this.offsets.set(key, this.length);
      this.bytes(Buffer.from([labels[i]!.length]));
      this.bytes(labels[i]!);
    }
    this.bytes(Buffer.from([0]));
  }

  /** Offsets recorded after `mark` are forgotten again on rollback. */
  mark(): { length: number; offsets: Map<string, number> } {
    return { length: this.length, offsets: new Map(this.offsets) };
  }

  rollback(m: { length: number; offsets: Map<string, number> }): void {
    this.length = m.length;
    this.offsets.clear();
    for (const [k, v] of m.offsets) this.offsets.set(k, v);
  }

  result(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.length));
  }
}

function writeHeader(w: Writer, h: Header): void {
  w.u16(h.id);
  let flags = (h.opcode & 0xf) << 11;
  if (h.response) flags |= 0x8000;
  if (h.authoritative) flags |= 0x0400;
  if (h.truncated) flags |= 0x0200;
  if (h.recursionDesired) flags |= 0x0100;
  if (h.recursionAvailable) flags |= 0x0080;
  if (h.zero) flags |= 0x0040;
  if (h.authenticatedData) flags |= 0x0020;
  if (h.checkingDisabled) flags |= 0x0010;
  w.u16(flags | (h.rcode & 0xf));
  for (let i = 0; i < 4; i++) w.u16(0);
}

function writeRecord(w: Writer, r: ResourceRecord): void {
  w.name(r.name, true);
  w.u16(r.type);
  w.u16(r.class);
  w.u32(r.ttl);
  const lenAt = w.length;
  w.u16(0);
  const start = w.length;
  if (COMPRESSIBLE_DATA.has(r.type)) {
    // re-read the expanded names so they can point into the message
    switch (r.type) {
      case TYPE.MX:
        w.bytes(r.data.subarray(0, 2));
        w.name(readName(r.data, 2)[0], true);
        break;
      case TYPE.SOA: {
        const [m, next] = readName(r.data, 0);
        const [rn, rest] = readName(r.data, next);
        w.name(m, true);
        w.name(rn, true);
        w.bytes(r.data.subarray(rest));
        break;
      }
      default:
        w.name(readName(r.data, 0)[0], true);
    }
  } else {
    w.bytes(r.data);
  }
  w.setU16(lenAt, w.length - start);
}

/**
 * Encodes a message, compressed. With `maxSize`, records that do not fit are left out, answers first kept,
 * then authorities, then additionals, the OPT record always kept, and TC set when anything was left out
 * (miekg/dns Msg.Truncate, which Istio's proxy applies to every answer).
 */
export function encodeMessage(m: Message, maxSize = MAX_MSG_SIZE): Buffer {
  const size = Math.max(maxSize, MIN_MSG_SIZE);
  const opt = m.additionals.filter((r) => r.type === TYPE.OPT);
  const extra = m.additionals.filter((r) => r.type !== TYPE.OPT);
  const optSize = opt.reduce((n, r) => n + 11 + r.data.length, 0);
  const w = new Writer();
  writeHeader(w, m.header);
  for (const q of m.questions) {
    w.name(q.name, true);
    w.u16(q.type);
    w.u16(q.class);
  }
  let truncated = m.header.truncated;
  const budget = size - optSize;
  const counts: number[] = [];
  for (const list of [m.answers, m.authorities, extra]) {
    let n = 0;
    for (const r of list) {
      const mark = w.mark();
      writeRecord(w, r);
      if (w.length > budget) {
        w.rollback(mark);
        truncated = true;
        break;
      }
      n++;
    }
    counts.push(n);
    if (n < list.length) {
      // a section cut short leaves no room for the next ones
      while (counts.length < 3) counts.push(0);
      break;
    }
  }
  for (const r of opt) writeRecord(w, r);
  const out = w.result();
  out.writeUInt16BE(m.questions.length, 4);
  out.writeUInt16BE(counts[0] ?? 0, 6);
  out.writeUInt16BE(counts[1] ?? 0, 8);
  out.writeUInt16BE((counts[2] ?? 0) + opt.length, 10);
  if (truncated) out.writeUInt16BE(out.readUInt16BE(2) | 0x0200, 2);
  return out;
}

/** miekg/dns SetReply: the reply skeleton of a query (id, opcode, RD and CD copied, first question only). */
export function replyTo(req: Message, rcode: number = RCODE.NOERROR): Message {
  const query = req.header.opcode === OPCODE_QUERY;
  return {
    header: {
      id: req.header.id,
      response: true,
      opcode: req.header.opcode,
      authoritative: false,
      truncated: false,
      recursionDesired: query && req.header.recursionDesired,
      recursionAvailable: false,
      zero: false,
      authenticatedData: false,
      checkingDisabled: query && req.header.checkingDisabled,
      rcode,
    },
    questions: req.questions.slice(0, 1),
    answers: [],
    authorities: [],
    additionals: [],
  };
}

/** A query for one name (tests and tools). */
export function query(id: number, name: string, type: number, o: { udpSize?: number; recursionDesired?: boolean } = {}): Message {
  return {
    header: {
      id,
      response: false,
      opcode: OPCODE_QUERY,
      authoritative: false,
      truncated: false,
      recursionDesired: o.recursionDesired ?? true,
      recursionAvailable: false,
      zero: false,
      authenticatedData: false,
      checkingDisabled: false,
      rcode: 0,
    },
    questions: [{ name, type, class: CLASS_INET }],
    answers: [],
    authorities: [],
    additionals: o.udpSize ? [{ name: '.', type: TYPE.OPT, class: o.udpSize, ttl: 0, data: Buffer.alloc(0) }] : [],
  };
}

/** The UDP payload size a query advertises in its OPT record (RFC 6891), or undefined without one. */
export function ednsUdpSize(m: Message): number | undefined {
  return m.additionals.find((r) => r.type === TYPE.OPT)?.class;
}
