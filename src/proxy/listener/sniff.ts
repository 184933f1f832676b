// What the first bytes of a connection say (Envoy's tls_inspector and http_inspector listener
// filters): a TLS ClientHello's SNI and ALPN, or the HTTP version of a plaintext request, and for
// original-destination dispatch the Host of an HTTP/1 request.

export type Sniffed = { kind: 'more' } | { kind: 'tls'; sni: string; alpn: string[] } | { kind: 'raw'; alpn: string[] };

const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
const MAX_CLIENT_HELLO = 64 * 1024;

/** Parses a (possibly fragmented) TLS ClientHello; `more` until it is complete. */
export function parseClientHello(b: Buffer): Sniffed {
  // collect handshake bytes from consecutive handshake records
  const hs: Buffer[] = [];
  let off = 0;
  let total = 0;
  while (off + 5 <= b.length) {
    if (b[off] !== 0x16) break;
    const len = b.readUInt16BE(off + 3);
    if (off + 5 + len > b.length) {
      hs.push(b.subarray(off + 5));
      total += b.length - off - 5;
      off = b.length;
      break;
    }
    hs.push(b.subarray(off + 5, off + 5 + len));
    total += len;
    off += 5 + len;
    if (total >= 4) {
      const h = Buffer.concat(hs);
      const need = 4 + ((h[1]! << 16) | (h[2]! << 8) | h[3]!);
      if (total >= need) break;
    }
  }
  const h = Buffer.concat(hs);
  if (h.length < 4) return b.length > MAX_CLIENT_HELLO ? { kind: 'raw', alpn: [] } : { kind: 'more' };
  if (h[0] !== 0x01) return { kind: 'tls', sni: '', alpn: [] };
  const msgLen = (h[1]! << 16) | (h[2]! << 8) | h[3]!;
  if (h.length < 4 + msgLen) return b.length > MAX_CLIENT_HELLO ? { kind: 'tls', sni: '', alpn: [] } : { kind: 'more' };
  const m = h.subarray(4, 4 + msgLen);
  let sni = '';
  const alpn: string[] = [];
  try {
    let p = 2 + 32; // version, random
    p += 1 + m[p]!; // session id
    p += 2 + m.readUInt16BE(p); // cipher suites
    p += 1 + m[p]!; // compression methods
    if (p + 2 > m.length) return { kind: 'tls', sni, alpn };
    const extEnd = p + 2 + m.readUInt16BE(p);
    p += 2;
    while (p + 4 <= extEnd && p + 4 <= m.length) {
      const type = m.readUInt16BE(p);
      const len = m.readUInt16BE(p + 2);
      const data = m.subarray(p + 4, p + 4 + len);
      if (type === 0 && data.length >= 5) {
        // server_name list: first host_name entry
        let q = 2;
        while (q + 3 <= data.length) {
          const nt = data[q]!;
          const nl = data.readUInt16BE(q + 1);
          if (nt === 0) {
            sni = data
              .subarray(q + 3, q + 3 + nl)
              .toString('latin1')
              .toLowerCase();
            break;
          }
          q += 3 + nl;
        }
      } else if (type === 16 && data.length >= 2) {
        let q = 2;
        while (q < data.length) {
          const l = data[q]!;
          alpn.push(data.subarray(q + 1, q + 1 + l).toString('latin1'));
          q += 1 + l;
        }
      }
      p += 4 + len;
    }
  } catch {
    // a malformed hello still counts as TLS; the handshake will fail on its own
  }
  return { kind: 'tls', sni, alpn };
}

const METHOD = /^[A-Z]{1,20}$/;

/** Envoy http_inspector: `h2c` for the HTTP/2 preface, `http/1.x` for a request line, else none. */
export function sniffHttp(b: Buffer): Sniffed {
  const n = Math.min(b.length, H2_PREFACE.length);
  if (b.subarray(0, n).equals(H2_PREFACE.subarray(0, n))) {
    return n === H2_PREFACE.length ? { kind: 'raw', alpn: ['h2c'] } : { kind: 'more' };
  }
  // a bare LF ends the line too: such a request goes on to the HTTP codec, which answers it, instead of waiting here
  const lf = b.indexOf(10);
  const eol = lf > 0 && b[lf - 1] === 13 ? lf - 1 : lf;
  const line = b.subarray(0, eol >= 0 ? eol : Math.min(b.length, 8192)).toString('latin1');
  const sp = line.indexOf(' ');
  const method = sp >= 0 ? line.slice(0, sp) : line;
  // anything but a method's upper-case letters first (a space, a control byte) is no HTTP/1 request to wait for
  if (!/^[A-Z]*$/.test(method) || method.length > 20 || sp === 0) return { kind: 'raw', alpn: [] };
  if (eol < 0) return b.length >= 8192 ? { kind: 'raw', alpn: [] } : { kind: 'more' };
  const parts = line.split(' ');
  if (parts.length !== 3 || !METHOD.test(parts[0]!)) return { kind: 'raw', alpn: [] };
  if (parts[2] === 'HTTP/1.1') return { kind: 'raw', alpn: ['http/1.1'] };
  if (parts[2] === 'HTTP/1.0') return { kind: 'raw', alpn: ['http/1.0'] };
  return { kind: 'raw', alpn: [] };
}

/**
 * Host and port an HTTP/1 request is for (absolute-form target first, then the Host header); `more`
 * until the header block is complete; undefined when it cannot tell.
 */
export function sniffHttpHost(b: Buffer, defaultPort: number): { host: string; port: number } | 'more' | undefined {
  const end = b.indexOf('\r\n\r\n');
  if (end < 0) return b.length >= 64 * 1024 ? undefined : 'more';
  const lines = b.subarray(0, end).toString('latin1').split('\r\n');
  const target = lines[0]?.split(' ')[1] ?? '';
  let hostValue: string | undefined;
  const abs = /^https?:\/\/([^/?#]+)/i.exec(target);
  if (abs) hostValue = abs[1];
  else {
    for (const l of lines.slice(1)) {
      const i = l.indexOf(':');
      if (i > 0 && l.slice(0, i).trim().toLowerCase() === 'host') {
        hostValue = l.slice(i + 1).trim();
        break;
      }
    }
  }
  if (!hostValue) return undefined;
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(hostValue) ?? /^([^:]+)(?::(\d+))?$/.exec(hostValue);
  if (!m) return undefined;
  return { host: m[1]!.toLowerCase(), port: m[2] ? Number(m[2]) : defaultPort };
}
