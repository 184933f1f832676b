// IP addresses and CIDR ranges for filter-chain matching and the internal/external request decision.
import net from 'node:net';
import type { CidrRange } from '../../gen/envoy/config/core/v3/address_pb';
import { ConfigError } from './config-error';
import { plainIp } from '../stream-info';
import { ipFamily } from '../../lib/ip';

/** IPv4 as a 32-bit value in a bigint, IPv6 as 128 bits; family tells them apart. */
export interface IpValue {
  family: 4 | 6;
  value: bigint;
}

export function parseIp(s: string): IpValue | undefined {
  const a = plainIp(s);
  const fam = ipFamily(a);
  if (fam === 4) {
    const p = a.split('.').map(Number);
    return { family: 4, value: BigInt(((p[0]! << 24) >>> 0) + (p[1]! << 16) + (p[2]! << 8) + p[3]!) };
  }
  if (fam === 6) {
    let parts = a.split('::');
    let head = parts[0] ? parts[0].split(':') : [];
    let tail = parts.length > 1 && parts[1] ? parts[1].split(':') : [];
    const expandV4 = (xs: string[]) => {
      const last = xs[xs.length - 1];
      if (last && last.includes('.')) {
        const v = last.split('.').map(Number);
        xs.splice(xs.length - 1, 1, ((v[0]! << 8) | v[1]!).toString(16), ((v[2]! << 8) | v[3]!).toString(16));
      }
      return xs;
    };
    if (parts.length > 1) tail = expandV4(tail);
    else head = expandV4(head);
    const fill = 8 - head.length - tail.length;
    const all = [...head, ...new Array<string>(Math.max(0, fill)).fill('0'), ...tail];
    let v = 0n;
    for (const h of all) v = (v << 16n) | BigInt(parseInt(h || '0', 16));
    parts = [];
    return { family: 6, value: v };
  }
  return undefined;
}

export interface Cidr {
  family: 4 | 6;
  prefix: bigint;
  len: number;
}

export function parseCidr(r: CidrRange, where: string): Cidr {
  const ip = parseIp(r.addressPrefix);
  if (!ip) throw new ConfigError(`${where}.address_prefix: malformed IP address: ${r.addressPrefix}`);
  const max = ip.family === 4 ? 32 : 128;
  const len = r.prefixLen ?? max;
  if (len > max) throw new ConfigError(`${where}.prefix_len: ${len} is too long for ${r.addressPrefix}`);
  return { family: ip.family, prefix: maskOf(ip.value, len, max), len };
}

function maskOf(v: bigint, len: number, max: number): bigint {
  if (len === 0) return 0n;
  const shift = BigInt(max - len);
  return (v >> shift) << shift;
}

export function cidrContains(c: Cidr, ip: IpValue | undefined): boolean {
  if (!ip) return false;
  let v = ip;
  // IPv4-mapped IPv6 clients match IPv4 ranges
  if (c.family === 4 && ip.family === 6 && ip.value >> 32n === 0xffffn) v = { family: 4, value: ip.value & 0xffffffffn };
  if (c.family !== v.family) return false;
  return maskOf(v.value, c.len, c.family === 4 ? 32 : 128) === c.prefix;
}

const LOOPBACK: Cidr[] = [
  { family: 4, prefix: 0x7f000000n, len: 8 },
  { family: 6, prefix: 1n, len: 128 },
];

/**
 * Envoy's Network::Utility::isLoopbackAddress: 127.0.0.0/8 (also IPv4-mapped) and ::1. (Envoy ≥ 1.33 has no
 * default internal addresses: without internal_address_config no peer is internal, loopback included.)
 */
export function isLoopback(ip: string): boolean {
  const v = parseIp(ip);
  return LOOPBACK.some((c) => cidrContains(c, v));
}
