// ASN.1 DER, the subset X.509 and PKCS#10 need: node:crypto signs, verifies and parses certificates but
// cannot build a certificate request or a certificate, so the bytes to sign are assembled here. The
// encoder produces canonical DER (definite lengths, minimal integers, sorted nothing: callers order SETs
// of one element); the reader walks TLVs without interpreting them, for the few fields callers pick out.

export const TAG = {
  BOOLEAN: 0x01,
  INTEGER: 0x02,
  BIT_STRING: 0x03,
  OCTET_STRING: 0x04,
  NULL: 0x05,
  OID: 0x06,
  UTF8_STRING: 0x0c,
  PRINTABLE_STRING: 0x13,
  IA5_STRING: 0x16,
  UTC_TIME: 0x17,
  GENERALIZED_TIME: 0x18,
  SEQUENCE: 0x30,
  SET: 0x31,
} as const;

function lengthBytes(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

/** One TLV with the given tag byte. */
export function tlv(tag: number, content: Buffer): Buffer {
  return Buffer.concat([Buffer.from([tag]), lengthBytes(content.length), content]);
}

export function sequence(...items: Buffer[]): Buffer {
  return tlv(TAG.SEQUENCE, Buffer.concat(items));
}

/** SET OF in DER order (elements sorted by their encodings). */
export function set(...items: Buffer[]): Buffer {
  return tlv(TAG.SET, Buffer.concat([...items].sort(Buffer.compare)));
}

export function boolean(v: boolean): Buffer {
  return tlv(TAG.BOOLEAN, Buffer.from([v ? 0xff : 0x00]));
}

export function nullValue(): Buffer {
  return tlv(TAG.NULL, Buffer.alloc(0));
}

/** INTEGER from a number, bigint or unsigned big-endian bytes (e.g. a serial number). */
export function integer(v: number | bigint | Buffer): Buffer {
  let bytes: Buffer;
  if (Buffer.isBuffer(v)) {
    let i = 0;
    while (i < v.length - 1 && v[i] === 0) i++;
    bytes = v.subarray(i);
    if (bytes.length === 0) bytes = Buffer.from([0]);
    if (bytes[0]! & 0x80) bytes = Buffer.concat([Buffer.from([0]), bytes]);
  } else {
    let n = BigInt(v);
    if (n < 0n) throw new RangeError('negative INTEGERs are not used in X.509 structures built here');
    const out: number[] = [];
    do {
      out.unshift(Number(n & 0xffn));
      n >>= 8n;
    } while (n > 0n);
    if (out[0]! & 0x80) out.unshift(0);
    bytes = Buffer.from(out);
  }
  return tlv(TAG.INTEGER, bytes);
}

export function oid(dotted: string): Buffer {
  const parts = dotted.split('.').map((p) => {
    if (!/^\d+$/.test(p)) throw new Error(`invalid object identifier ${JSON.stringify(dotted)}`);
    return BigInt(p);
  });
  if (parts.length < 2) throw new Error(`invalid object identifier ${JSON.stringify(dotted)}`);
  const arcs = [parts[0]! * 40n + parts[1]!, ...parts.slice(2)];
  const out: number[] = [];
  for (const arc of arcs) {
    const chunk: number[] = [Number(arc & 0x7fn)];
    for (let a = arc >> 7n; a > 0n; a >>= 7n) chunk.unshift(Number(a & 0x7fn) | 0x80);
    out.push(...chunk);
  }
  return tlv(TAG.OID, Buffer.from(out));
}

/** BIT STRING with no unused bits (keys and signatures). */
export function bitString(bytes: Buffer): Buffer {
  return tlv(TAG.BIT_STRING, Buffer.concat([Buffer.from([0]), bytes]));
}

export function octetString(bytes: Buffer): Buffer {
  return tlv(TAG.OCTET_STRING, bytes);
}

export function utf8String(s: string): Buffer {
  return tlv(TAG.UTF8_STRING, Buffer.from(s, 'utf8'));
}

const PRINTABLE = /^[A-Za-z0-9 '()+,\-./:=?]*$/;

/** PrintableString when the text allows it, else UTF8String (Go's encoding/asn1 choice for strings). */
export function directoryString(s: string): Buffer {
  return PRINTABLE.test(s) ? tlv(TAG.PRINTABLE_STRING, Buffer.from(s, 'latin1')) : utf8String(s);
}

export function ia5String(s: string): Buffer {
  if (!/^[\x00-\x7f]*$/.test(s)) throw new Error(`not an IA5String (ASCII only): ${JSON.stringify(s)}`);
  return tlv(TAG.IA5_STRING, Buffer.from(s, 'latin1'));
}

/** UTCTime up to 2049, GeneralizedTime from 2050 on (RFC 5280 §4.1.2.5). */
export function time(d: Date): Buffer {
  const iso = d.toISOString(); // 2025-01-02T03:04:05.678Z
  const y = d.getUTCFullYear();
  const rest = iso.slice(5, 19).replace(/[-T:]/g, ''); // MMDDHHMMSS
  if (y >= 1950 && y < 2050) return tlv(TAG.UTC_TIME, Buffer.from(`${String(y % 100).padStart(2, '0')}${rest}Z`, 'latin1'));
  return tlv(TAG.GENERALIZED_TIME, Buffer.from(`${String(y).padStart(4, '0')}${rest}Z`, 'latin1'));
}

/** [n] EXPLICIT: a constructed context tag around a complete encoding. */
export function explicit(n: number, inner: Buffer): Buffer {
  return tlv(0xa0 | n, inner);
}

/** [n] IMPLICIT over primitive content (e.g. GeneralName uniformResourceIdentifier [6]). */
export function implicitPrimitive(n: number, content: Buffer): Buffer {
  return tlv(0x80 | n, content);
}

/** [n] IMPLICIT over constructed content (e.g. the CSR's attributes [0] SET OF). */
export function implicitConstructed(n: number, content: Buffer): Buffer {
  return tlv(0xa0 | n, content);
}

// ---- reading ----

export class DerError extends Error {}

export interface Node {
  tag: number;
  /** Offset of the tag byte within the buffer read. */
  start: number;
  /** Offset of the content. */
  contentStart: number;
  end: number;
  /** The content bytes. */
  content: Buffer;
  /** The whole TLV. */
  raw: Buffer;
}

/** Reads the TLV at `offset`. */
export function readNode(buf: Buffer, offset = 0): Node {
  if (offset + 2 > buf.length) throw new DerError(`truncated DER at byte ${offset}`);
  const tag = buf[offset]!;
  if ((tag & 0x1f) === 0x1f) throw new DerError(`high-tag-number form at byte ${offset} is not used in these structures`);
  let len = buf[offset + 1]!;
  let p = offset + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0) throw new DerError(`indefinite length at byte ${offset} is not DER`);
    if (n > 4 || p + n > buf.length) throw new DerError(`bad length at byte ${offset}`);
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[p + i]!;
    p += n;
  }
  const end = p + len;
  if (end > buf.length) throw new DerError(`truncated DER: element at byte ${offset} needs ${len} bytes, ${buf.length - p} left`);
  return { tag, start: offset, contentStart: p, end, content: buf.subarray(p, end), raw: buf.subarray(offset, end) };
}

/** The elements inside a constructed node, in order. */
export function children(node: Node): Node[] {
  const out: Node[] = [];
  for (let p = 0; p < node.content.length;) {
    const c = readNode(node.content, p);
    out.push(c);
    p = c.end;
  }
  return out;
}

/** Parses a complete DER value; trailing bytes are an error. */
export function parse(buf: Buffer): Node {
  const n = readNode(buf, 0);
  if (n.end !== buf.length) throw new DerError(`${buf.length - n.end} trailing bytes after the DER value`);
  return n;
}

export function expectTag(n: Node, tag: number, what: string): Node {
  if (n.tag !== tag) throw new DerError(`${what}: expected tag 0x${tag.toString(16)}, got 0x${n.tag.toString(16)}`);
  return n;
}

export function readOid(n: Node): string {
  expectTag(n, TAG.OID, 'object identifier');
  const b = n.content;
  if (b.length === 0) throw new DerError('empty object identifier');
  const arcs: bigint[] = [];
  let v = 0n;
  for (const byte of b) {
    v = (v << 7n) | BigInt(byte & 0x7f);
    if (!(byte & 0x80)) {
      arcs.push(v);
      v = 0n;
    }
  }
  const first = arcs.shift()!;
  const a = first < 80n ? first / 40n : 2n;
  return [a, first - a * 40n, ...arcs].join('.');
}

export function readString(n: Node): string {
  if (n.tag === TAG.UTF8_STRING) return n.content.toString('utf8');
  if (n.tag === TAG.PRINTABLE_STRING || n.tag === TAG.IA5_STRING || n.tag === 0x14 /* T61 */) return n.content.toString('latin1');
  throw new DerError(`expected a string, got tag 0x${n.tag.toString(16)}`);
}

/** The bytes of a BIT STRING with no unused bits. */
export function readBitString(n: Node): Buffer {
  expectTag(n, TAG.BIT_STRING, 'bit string');
  if (n.content.length === 0 || n.content[0] !== 0) throw new DerError('bit string with unused bits');
  return n.content.subarray(1);
}

// ---- PEM ----

export function toPem(label: string, der: Buffer): string {
  const b64 = der.toString('base64').replace(/.{64}/g, '$&\n').replace(/\n$/, '');
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

/** Every PEM block with the given label, decoded. */
export function fromPem(text: string, label: string): Buffer[] {
  const re = new RegExp(`-----BEGIN ${label}-----([\\s\\S]*?)-----END ${label}-----`, 'g');
  const out: Buffer[] = [];
  for (const m of text.matchAll(re)) out.push(Buffer.from(m[1]!.replace(/\s+/g, ''), 'base64'));
  return out;
}
