// x-forwarded-client-cert from a trusted gateway (Istio's XfccAuthenticator, TRUSTED_GATEWAY_CIDR): a
// gateway that terminated the workload's mTLS forwards what the client certificate said, and a caller
// connecting from a trusted range (or loopback, which Istio always trusts) is taken at its word.
import { BlockList } from 'node:net';
import { ipFamily } from '../../lib/ip';
import { AuthnError, type Authenticator, type AuthRequest, type Caller } from './types';

export const XFCC_HEADER = 'x-forwarded-client-cert';

/** One element of the header: the pairs Envoy writes (By, Hash, Cert, Chain, Subject, URI, DNS). */
export interface XfccElement {
  by: string[];
  hash?: string;
  subject?: string;
  uri: string[];
  dns: string[];
}

export class XfccError extends Error {}

/** Splits on `sep` outside double quotes. */
function splitUnquoted(s: string, sep: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === '\\' && quoted && i + 1 < s.length) {
      cur += c + s[i + 1];
      i++;
    } else if (c === '"') {
      quoted = !quoted;
      cur += c;
    } else if (c === sep && !quoted) {
      out.push(cur);
      cur = '';
    } else cur += c;
  }
  if (quoted) throw new XfccError(`unterminated quoted value in ${JSON.stringify(s)}`);
  out.push(cur);
  return out;
}

function unquote(v: string): string {
  const t = v.trim();
  if (t.length >= 2 && t.startsWith('"') && t.endsWith('"')) return t.slice(1, -1).replace(/\\(.)/g, '$1');
  return t;
}

/** Parses the header Envoy sets (`By=…;Hash=…;Subject="…";URI=…,By=…`). */
export function parseXfcc(header: string): XfccElement[] {
  const out: XfccElement[] = [];
  for (const element of splitUnquoted(header, ',')) {
    if (element.trim() === '') continue;
    const e: XfccElement = { by: [], uri: [], dns: [] };
    for (const pair of splitUnquoted(element, ';')) {
      if (pair.trim() === '') continue;
      const eq = pair.indexOf('=');
      if (eq <= 0) throw new XfccError(`malformed pair ${JSON.stringify(pair)}: expected key=value`);
      const key = pair.slice(0, eq).trim().toLowerCase();
      const value = unquote(pair.slice(eq + 1));
      if (key === 'by') e.by.push(value);
      else if (key === 'hash') e.hash = value;
      else if (key === 'subject') e.subject = value;
      else if (key === 'uri') e.uri.push(value);
      else if (key === 'dns') e.dns.push(value);
      else if (key !== 'cert' && key !== 'chain') throw new XfccError(`unknown key ${JSON.stringify(pair.slice(0, eq).trim())}`);
    }
    out.push(e);
  }
  return out;
}

/** The CN of a subject in RFC 2253 form (`CN=x,OU=y`, as Envoy writes it) or OpenSSL's `/CN=x/OU=y`. */
export function commonName(subject: string): string | undefined {
  const parts = subject.startsWith('/') ? subject.slice(1).split('/') : subject.split(/(?<!\\),/);
  for (const p of parts) {
    const m = /^\s*CN\s*=(.*)$/i.exec(p);
    if (m) return m[1]!.trim().replace(/\\(.)/g, '$1');
  }
  return undefined;
}

/** `ip:port` / `[v6]:port` / `v6:port` → ip. */
export function hostOf(address: string): string | undefined {
  // grpc-js prints an IPv6 peer unbracketed (`::ffff:127.0.0.1:40000`): the port is after the last colon
  const m = /^\[([^\]]+)\]:\d+$/.exec(address) ?? /^(.+):\d+$/.exec(address);
  if (m && ipFamily(m[1]!)) return m[1]!;
  return ipFamily(address) ? address : undefined;
}

/** A CIDR list as a BlockList; entries without a `/` are ignored, as Istio's isInRange does. */
export function trustedRanges(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const c of cidrs) {
    const [addr, bits] = c.trim().split('/');
    if (!addr || bits === undefined || !ipFamily(addr)) continue;
    list.addSubnet(addr, Number(bits), ipFamily(addr) === 6 ? 'ipv6' : 'ipv4');
  }
  return list;
}

function isLoopback(ip: string): boolean {
  return ip === '::1' || /^127\./.test(ip) || /^::ffff:127\./i.test(ip);
}

export class XfccAuthenticator implements Authenticator {
  readonly type = 'XfccAuthenticator';
  private readonly trusted: BlockList;

  constructor(cidrs: readonly string[]) {
    this.trusted = trustedRanges(cidrs);
  }

  async authenticate(req: AuthRequest): Promise<Caller> {
    const header = req.header(XFCC_HEADER);
    if (!req.remoteAddress || header.length === 0) throw new AuthnError(`caller from ${req.remoteAddress} does not have Xfcc header`);
    const ip = hostOf(req.remoteAddress);
    const trusted = ip !== undefined && (isLoopback(ip) || this.trusted.check(ip, ipFamily(ip) === 6 ? 'ipv6' : 'ipv4'));
    if (!trusted) throw new AuthnError(`caller from ${req.remoteAddress} is not in the trusted network. XfccAuthenticator can not be used`);
    let elements: XfccElement[];
    try {
      elements = parseXfcc(header[0]!);
    } catch (e) {
      throw new AuthnError(`error in parsing xfcc header: ${(e as Error).message}`);
    }
    if (elements.length === 0) throw new AuthnError('xfcc header does not have at least one client certs');
    const ids: string[] = [];
    for (const e of elements) {
      ids.push(...e.uri, ...e.dns);
      const cn = e.subject !== undefined ? commonName(e.subject) : undefined;
      if (cn) ids.push(cn);
    }
    if (ids.length === 0) throw new AuthnError('the xfcc header names no URI, DNS or subject common name', true);
    return { source: 'client-certificate', identities: ids };
  }
}
