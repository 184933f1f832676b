// IP address and CIDR handling with Go net/netip semantics, because rules must print prefixes
// exactly as Istio does (unmasked address, RFC 5952 IPv6 text) and accept exactly what it accepts.

export interface IpAddr {
  readonly family: 4 | 6;
  /** 4 or 16 bytes, network order. */
  readonly bytes: readonly number[];
}

export interface Cidr {
  readonly addr: IpAddr;
  readonly bits: number;
}

function parseIPv4(text: string): number[] | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  const out: number[] = [];
  for (const p of parts) {
    // Go rejects leading zeros ("01") because they read as octal elsewhere.
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    out.push(n);
  }
  return out;
}

function parseIPv6(text: string): number[] | undefined {
  if (text.includes('%')) return undefined; // zones have no place in rules or CIDRs
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groupsOf = (s: string): number[] | undefined => {
    if (s === '') return [];
    const out: number[] = [];
    const parts = s.split(':');
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i]!;
      if (i === parts.length - 1 && p.includes('.')) {
        const v4 = parseIPv4(p);
        if (!v4) return undefined;
        out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
        continue;
      }
      if (!/^[0-9a-fA-F]{1,4}$/.test(p)) return undefined;
      out.push(parseInt(p, 16));
    }
    return out;
  };
  const head = groupsOf(halves[0]!);
  const tail = halves.length === 2 ? groupsOf(halves[1]!) : [];
  if (!head || !tail) return undefined;
  let groups: number[];
  if (halves.length === 2) {
    const missing = 8 - head.length - tail.length;
    if (missing < 1) return undefined;
    groups = [...head, ...new Array<number>(missing).fill(0), ...tail];
  } else {
    groups = head;
  }
  if (groups.length !== 8) return undefined;
  return groups.flatMap((g) => [g >> 8, g & 0xff]);
}

export function parseIp(text: string): IpAddr | undefined {
  if (text.includes(':')) {
    const bytes = parseIPv6(text);
    return bytes ? { family: 6, bytes } : undefined;
  }
  const bytes = parseIPv4(text);
  return bytes ? { family: 4, bytes } : undefined;
}

/** IPv4-mapped IPv6 (::ffff:a.b.c.d) becomes the plain IPv4 address, like netip.Addr.Unmap. */
export function unmap(addr: IpAddr): IpAddr {
  if (addr.family === 6 && addr.bytes.slice(0, 10).every((b) => b === 0) && addr.bytes[10] === 0xff && addr.bytes[11] === 0xff) {
    return { family: 4, bytes: addr.bytes.slice(12) };
  }
  return addr;
}

export function formatIp(addr: IpAddr): string {
  if (addr.family === 4) return addr.bytes.join('.');
  const b = addr.bytes;
  if (unmap(addr).family === 4) return `::ffff:${b.slice(12).join('.')}`;
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((b[i]! << 8) | b[i + 1]!);
  // RFC 5952: compress the first longest run of two or more zero groups.
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (gs: number[]) => gs.map((g) => g.toString(16)).join(':');
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLen))}`;
}

/** Like netip.ParsePrefix: address and decimal prefix length, the address is not masked. */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const addr = parseIp(text.slice(0, slash));
  const bitsText = text.slice(slash + 1);
  if (!addr || !/^(0|[1-9][0-9]{0,2})$/.test(bitsText)) return undefined;
  const bits = Number(bitsText);
  if (bits > (addr.family === 4 ? 32 : 128)) return undefined;
  return { addr, bits };
}

export function formatCidr(c: Cidr): string {
  return `${formatIp(c.addr)}/${c.bits}`;
}

export function isLoopback(addr: IpAddr): boolean {
  if (addr.family === 4) return addr.bytes[0] === 127;
  return addr.bytes.slice(0, 15).every((b) => b === 0) && addr.bytes[15] === 1;
}

export function isLinkLocalUnicast(addr: IpAddr): boolean {
  if (addr.family === 4) return addr.bytes[0] === 169 && addr.bytes[1] === 254;
  return addr.bytes[0] === 0xfe && (addr.bytes[1]! & 0xc0) === 0x80;
}

export function isLinkLocalMulticast(addr: IpAddr): boolean {
  if (addr.family === 4) return addr.bytes[0] === 224 && addr.bytes[1] === 0 && addr.bytes[2] === 0;
  return addr.bytes[0] === 0xff && addr.bytes[1] === 0x02;
}
