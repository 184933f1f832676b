// Protobuf wire format by hand, for the few messages where loading the protobuf runtime or serialising a whole
// message each time costs more than the message is worth: the xDS responses (the same resource bytes copied
// into every proxy's response) and the workload's certificate request (on the agent's way to its first
// certificate, before the protobuf runtime is loaded). Each user tests its output byte for byte against
// toBinary/fromBinary of the generated schema.

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_LENGTH_DELIMITED = 2;
export const WIRE_FIXED32 = 5;

export function varintLength(n: number): number {
  let len = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    len++;
  }
  return len;
}

/** Writes a non-negative integer below 2^53 as a varint; returns the offset after it. */
export function writeVarint(buf: Buffer, offset: number, n: number): number {
  while (n >= 0x80) {
    buf[offset++] = (n % 128) | 0x80;
    n = Math.floor(n / 128);
  }
  buf[offset++] = n;
  return offset;
}

/** A length-delimited field: tag, length, bytes. */
export function lengthDelimited(field: number, bytes: Uint8Array): Buffer {
  const tag = (field << 3) | WIRE_LENGTH_DELIMITED;
  const out = Buffer.allocUnsafe(varintLength(tag) + varintLength(bytes.length) + bytes.length);
  let o = writeVarint(out, 0, tag);
  o = writeVarint(out, o, bytes.length);
  out.set(bytes, o);
  return out;
}

/** A string field, omitted when empty (proto3 default). */
export function stringField(field: number, s: string): Buffer | undefined {
  return s === '' ? undefined : lengthDelimited(field, utf8.encode(s));
}

/** A string that is written even when empty (a oneof member, a map key or value). */
export function presentStringField(field: number, s: string): Buffer {
  return lengthDelimited(field, utf8.encode(s));
}

/** An int64 field, omitted when zero; negative values take ten bytes (two's complement), as protobuf does. */
export function int64Field(field: number, v: bigint): Buffer | undefined {
  if (v === 0n) return undefined;
  let u = BigInt.asUintN(64, v);
  const bytes: number[] = [];
  while (u >= 0x80n) {
    bytes.push(Number(u & 0x7fn) | 0x80);
    u >>= 7n;
  }
  bytes.push(Number(u));
  const tag = (field << 3) | WIRE_VARINT;
  const out = Buffer.allocUnsafe(varintLength(tag) + bytes.length);
  const o = writeVarint(out, 0, tag);
  out.set(bytes, o);
  return out;
}

export function concat(parts: Array<Buffer | undefined>): Buffer {
  return Buffer.concat(parts.filter((p): p is Buffer => p !== undefined));
}

export class WireError extends Error {
  override name = 'WireError';
}

export interface WireField {
  field: number;
  wireType: number;
  /** The bytes of a length-delimited field; undefined for the others (skipped). */
  bytes?: Uint8Array;
}

function readVarint(b: Uint8Array, at: number): { value: number; next: number } {
  let value = 0;
  let scale = 1;
  for (let i = at; i < b.length && i < at + 10; i++) {
    const byte = b[i]!;
    value += (byte & 0x7f) * scale;
    scale *= 128;
    if (byte < 0x80) return { value, next: i + 1 };
  }
  throw new WireError(`malformed varint at byte ${at}`);
}

/** The fields of one message in order; length-delimited ones with their bytes. Throws WireError on bad input. */
export function* readFields(b: Uint8Array): Generator<WireField> {
  let at = 0;
  while (at < b.length) {
    const tag = readVarint(b, at);
    at = tag.next;
    const field = Math.floor(tag.value / 8);
    const wireType = tag.value % 8;
    if (field === 0) throw new WireError(`field number 0 at byte ${at}`);
    switch (wireType) {
      case WIRE_VARINT:
        at = readVarint(b, at).next;
        yield { field, wireType };
        break;
      case WIRE_FIXED64:
      case WIRE_FIXED32:
        at += wireType === WIRE_FIXED64 ? 8 : 4;
        if (at > b.length) throw new WireError(`field ${field} runs past the end of the message`);
        yield { field, wireType };
        break;
      case WIRE_LENGTH_DELIMITED: {
        const len = readVarint(b, at);
        const end = len.next + len.value;
        if (end > b.length) throw new WireError(`field ${field} runs past the end of the message`);
        yield { field, wireType, bytes: b.subarray(len.next, end) };
        at = end;
        break;
      }
      default:
        throw new WireError(`unsupported wire type ${wireType} for field ${field}`);
    }
  }
}

/** A string field's bytes as text; protobuf strings are UTF-8, anything else is refused. */
export function readString(bytes: Uint8Array): string {
  try {
    return utf8Decoder.decode(bytes);
  } catch {
    throw new WireError('string field is not valid UTF-8');
  }
}
