// Virtual hosts kept as received: the bytes of each VirtualHost inside the encoded RouteConfiguration (or the
// VHDS resource), with their domains, decoded only when a request first selects one (src/proxy/route/compile.ts).
// Envoy decodes a route configuration once and shares it between workers; a JS object cannot be shared between
// threads, so each thread keeps these bytes (views of what the xDS client holds anyway) instead of the messages.
import { fromBinary } from '@bufbuild/protobuf';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import { VirtualHostSchema, type VirtualHost } from '../../gen/envoy/config/route/v3/route_components_pb';
import type { VirtualHostSource } from './compile';

/** RouteConfiguration.virtual_hosts. */
const VIRTUAL_HOSTS_FIELD = 2;

export class EncodedVirtualHost implements VirtualHostSource {
  constructor(
    readonly domains: readonly string[],
    readonly bytes: Uint8Array,
  ) {}

  message(): VirtualHost {
    return fromBinary(VirtualHostSchema, this.bytes);
  }
}

/** Views of each encoded VirtualHost of an encoded RouteConfiguration, in order (no copy). */
export function virtualHostBytes(routeConfiguration: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  const r = new BinaryReader(routeConfiguration);
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === VIRTUAL_HOSTS_FIELD && wt === WireType.LengthDelimited) out.push(r.bytes());
    else r.skip(wt, no);
  }
  return out;
}

/** The virtual hosts of an encoded RouteConfiguration, with the domains of its decoded `virtualHosts` (same order). */
export function encodedVirtualHosts(routeConfiguration: Uint8Array, decoded: ReadonlyArray<{ domains: readonly string[] }>): EncodedVirtualHost[] {
  const bytes = virtualHostBytes(routeConfiguration);
  if (bytes.length !== decoded.length) throw new Error(`route configuration: ${bytes.length} encoded virtual hosts, ${decoded.length} decoded`);
  return bytes.map((b, i) => new EncodedVirtualHost(decoded[i]!.domains, b));
}
