// Istio's TCP metadata exchange bytes written by hand (istio/proxy release-1.26 metadata_exchange_initial_header.h:
// magic 0x3D230467 then the payload length, 32-bit big-endian each; the payload a google.protobuf.Any of a
// google.protobuf.Struct in protobuf's wire format), so tests check the engine against the layout rather than
// against its own encoder.

export function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}
export const bytes = (...parts: Array<number[] | Buffer>) => Buffer.concat(parts.map((p) => Buffer.from(p)));
/** A length-delimited field (wire type 2). */
export const field = (n: number, body: Buffer) => bytes([(n << 3) | 2], varint(body.length), body);
export const str = (n: number, s: string) => field(n, Buffer.from(s, 'utf8'));
/** google.protobuf.Struct from [key, Value bytes] entries, in the order given (the test gives them sorted). */
export const struct = (entries: Array<[string, Buffer]>) => bytes(...entries.map(([k, v]) => field(1, bytes(str(1, k), field(2, v)))));
export const stringValue = (s: string) => str(3, s);
export const structValue = (entries: Array<[string, Buffer]>) => field(5, struct(entries));
export const any = (typeUrl: string, value: Buffer) => bytes(str(1, typeUrl), field(2, value));
export const header = (magic: number, length: number) =>
  bytes(
    [magic >>> 24, (magic >>> 16) & 0xff, (magic >>> 8) & 0xff, magic & 0xff],
    [length >>> 24, (length >>> 16) & 0xff, (length >>> 8) & 0xff, length & 0xff],
  );
export const STRUCT = 'type.googleapis.com/google.protobuf.Struct';

/** The header then the payload. */
export const framed = (payload: Buffer) => bytes(header(0x3d230467, payload.length), payload);

/** A peer's exchange as Istio builds it (convertWorkloadMetadataToStruct, keys sorted), for `entries` of its Struct. */
export function peerExchange(id: string, peer: Array<[string, Buffer]>): Buffer {
  return framed(
    any(
      STRUCT,
      struct([
        ['x-envoy-peer-metadata', field(5, struct(peer))],
        ['x-envoy-peer-metadata-id', stringValue(id)],
      ]),
    ),
  );
}
