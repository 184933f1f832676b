// Envoy's substitution format strings (`%REQ(:AUTHORITY)%`, `%RESPONSE_CODE%`…) for access logs and
// header values (source/common/formatter/substitution_formatter.cc, stream_info_formatter.cc). Compiled once into
// pieces; a piece that yields nothing prints `-` in access logs (nothing with omit_empty_values) and nothing in
// headers, as Envoy does. REQ_WITHOUT_QUERY (Envoy's envoy.formatter.req_without_query extension) is always
// understood; commands that need more than the stream (Envoy's CEL formatter) come from a CommandHook.
import os from 'node:os';
import type { JsonValue } from '@bufbuild/protobuf';
import { ConfigError } from '../common/config-error';
import { joinHostPort } from '../../lib/hostport';
import type { StreamInfo } from '../stream-info';
import { ENVOY_STREAM_INFO_COMMANDS } from './envoy-commands';

/** Reads request or response headers by lower-case name (pseudo-headers included). */
export interface HeaderSource {
  get(name: string): string | undefined;
}

export interface FormatContext {
  info: StreamInfo;
  request?: HeaderSource;
  response?: HeaderSource;
  trailers?: HeaderSource;
  /** Per-request filter state (FILTER_STATE, CEL's filter_state). */
  filterState?: ReadonlyMap<string, unknown>;
}

/** A command value for one request; undefined when there is none (printed `-`). */
export type CommandFn = (c: FormatContext) => string | undefined;

/** Commands a caller adds (Envoy's formatter extensions): a function for `cmd(arg)`, or undefined when not its own. */
export type CommandHook = (cmd: string, arg: string | undefined, where: string) => CommandFn | undefined;

type Piece = string | CommandFn;

export const DEFAULT_ACCESS_LOG_FORMAT =
  '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% ' +
  '%BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" ' +
  '"%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"\n';

const HOSTNAME = os.hostname();

function headerCommand(arg: string, which: 'request' | 'response' | 'trailers', cmd: string): (c: FormatContext) => string | undefined {
  const m = /^([^?]+)(?:\?([^?]+))?$/.exec(arg);
  if (!m)
    throw new ConfigError(
      `Invalid header configuration. Expected format ${cmd}(<header_name>[?<alternative>])[:<max_length>], actual format ${cmd}(${arg})`,
    );
  const main = m[1]!.toLowerCase();
  const alt = m[2]?.toLowerCase();
  return (c) => {
    const src = c[which];
    const v = src?.get(main);
    return v === undefined && alt ? src?.get(alt) : v;
  };
}

/** REQ_WITHOUT_QUERY: a request header with everything from the first `?` removed (for :path). */
function withoutQuery(inner: CommandFn): CommandFn {
  return (c) => {
    const v = inner(c);
    if (v === undefined) return undefined;
    const q = v.indexOf('?');
    return q < 0 ? v : v.slice(0, q);
  };
}

/** FILTER_STATE(KEY[:PLAIN|:TYPED]): the object's string form; a JSON object is serialised. */
function filterStateCommand(arg: string, where: string): CommandFn {
  const key = arg.replace(/:(PLAIN|TYPED)$/, '');
  if (!key) throw new ConfigError(`${where}: Invalid filter state configuration: ${arg}`);
  return (c) => {
    const v = c.filterState?.get(key);
    if (v === undefined || v === null) return undefined;
    if (typeof v === 'string') return v;
    if (typeof v === 'number' || typeof v === 'boolean') return String(v);
    if (typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) return JSON.stringify(v);
    return undefined;
  };
}

function hostPortParts(hp: string): [string, string] | undefined {
  const m = /^\[?(.*?)\]?:(\d+)$/.exec(hp);
  return m ? [m[1]!, m[2]!] : undefined;
}

function addrNoPort(s: string): string {
  if (s.startsWith('[')) return s.slice(1, s.indexOf(']'));
  const i = s.lastIndexOf(':');
  return i > 0 && s.indexOf(':') === i ? s.slice(0, i) : s;
}

function startTime(fmt: string | undefined): (c: FormatContext) => string {
  if (!fmt) return (c) => new Date(c.info.startTime).toISOString();
  return (c) => {
    const d = new Date(c.info.startTime);
    const p = (n: number, w = 2) => String(n).padStart(w, '0');
    return fmt.replace(/%(E?\d?[A-Za-z])/g, (_m, f: string) => {
      switch (f) {
        case 'Y':
          return String(d.getUTCFullYear());
        case 'm':
          return p(d.getUTCMonth() + 1);
        case 'd':
          return p(d.getUTCDate());
        case 'H':
          return p(d.getUTCHours());
        case 'M':
          return p(d.getUTCMinutes());
        case 'S':
          return p(d.getUTCSeconds());
        case 'E3S':
          return `${p(d.getUTCSeconds())}.${p(d.getUTCMilliseconds(), 3)}`;
        case 's':
          return String(Math.floor(d.getTime() / 1000));
        case 'z':
          return '+0000';
        case 'T':
          return `${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())}`;
        case 'F':
          return `${d.getUTCFullYear()}-${p(d.getUTCMonth() + 1)}-${p(d.getUTCDate())}`;
        default:
          return `%${f}`;
      }
    });
  };
}

function dynamicMetadata(arg: string): (c: FormatContext) => string | undefined {
  const [ns, ...path] = arg.split(':');
  return (c) => {
    let v: JsonValue | undefined = c.info.dynamicMetadata.get(ns!);
    for (const k of path) {
      if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
      v = (v as Record<string, JsonValue>)[k];
    }
    if (v === undefined) return undefined;
    return typeof v === 'string' ? v : JSON.stringify(v);
  };
}

const num = (n: number) => String(n);

/** Commands without arguments. */
const SIMPLE: Record<string, (c: FormatContext) => string | undefined> = {
  PROTOCOL: (c) => c.info.protocol || undefined,
  RESPONSE_CODE: (c) => num(c.info.responseCode),
  RESPONSE_CODE_DETAILS: (c) => c.info.responseCodeDetails || undefined,
  RESPONSE_FLAGS: (c) => c.info.flagString(),
  BYTES_RECEIVED: (c) => num(c.info.bytesReceived),
  BYTES_SENT: (c) => num(c.info.bytesSent),
  DURATION: (c) => num(c.info.durationMs()),
  UPSTREAM_HOST: (c) => c.info.upstreamHost || undefined,
  UPSTREAM_CLUSTER: (c) => c.info.upstreamCluster || undefined,
  UPSTREAM_CLUSTER_RAW: (c) => c.info.upstreamCluster || undefined,
  UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT: (c) => (c.info.upstreamHost ? (hostPortParts(c.info.upstreamHost)?.[0] ?? c.info.upstreamHost) : undefined),
  UPSTREAM_REMOTE_PORT: (c) => (c.info.upstreamHost ? hostPortParts(c.info.upstreamHost)?.[1] : undefined),
  UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT: (c) =>
    c.info.upstreamLocalAddress ? (hostPortParts(c.info.upstreamLocalAddress)?.[0] ?? c.info.upstreamLocalAddress) : undefined,
  UPSTREAM_LOCAL_PORT: (c) => (c.info.upstreamLocalAddress ? hostPortParts(c.info.upstreamLocalAddress)?.[1] : undefined),
  DOWNSTREAM_DIRECT_LOCAL_ADDRESS: (c) => joinHostPort(c.info.downstream.localAddress, c.info.downstream.localPort),
  DOWNSTREAM_DIRECT_LOCAL_ADDRESS_WITHOUT_PORT: (c) => c.info.downstream.localAddress,
  DOWNSTREAM_DIRECT_LOCAL_PORT: (c) => num(c.info.downstream.localPort),
  DOWNSTREAM_DIRECT_REMOTE_PORT: (c) => num(c.info.downstream.remotePort),
  DOWNSTREAM_PEER_DNS_SAN: (c) => c.info.downstream.peerDnsSans.join(',') || undefined,
  DOWNSTREAM_LOCAL_URI_SAN: (c) => c.info.downstream.ssl?.uriSanLocalCertificate.join(',') || undefined,
  DOWNSTREAM_PEER_FINGERPRINT_256: (c) => c.info.downstream.ssl?.sha256PeerCertificateDigest || undefined,
  UPSTREAM_HOST_NAME_WITHOUT_PORT: (c) => (c.info.upstreamHost ? (hostPortParts(c.info.upstreamHost)?.[0] ?? c.info.upstreamHost) : undefined),
  UPSTREAM_LOCAL_ADDRESS: (c) => c.info.upstreamLocalAddress || undefined,
  UPSTREAM_TRANSPORT_FAILURE_REASON: (c) => c.info.upstreamTransportFailureReason || undefined,
  UPSTREAM_REQUEST_ATTEMPT_COUNT: (c) => num(c.info.attemptCount),
  DOWNSTREAM_REMOTE_ADDRESS: (c) => joinHostPort(c.info.downstream.remoteAddress, c.info.downstream.remotePort),
  DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT: (c) => c.info.downstream.remoteAddress,
  DOWNSTREAM_REMOTE_PORT: (c) => num(c.info.downstream.remotePort),
  DOWNSTREAM_DIRECT_REMOTE_ADDRESS: (c) => joinHostPort(c.info.downstream.remoteAddress, c.info.downstream.remotePort),
  DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT: (c) => c.info.downstream.remoteAddress,
  DOWNSTREAM_LOCAL_ADDRESS: (c) => joinHostPort(c.info.downstream.localAddress, c.info.downstream.localPort),
  DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT: (c) => c.info.downstream.localAddress,
  DOWNSTREAM_LOCAL_PORT: (c) => num(c.info.downstream.localPort),
  DOWNSTREAM_PEER_URI_SAN: (c) => c.info.downstream.peerUriSans.join(',') || undefined,
  DOWNSTREAM_PEER_SUBJECT: (c) => c.info.downstream.peerSubject || undefined,
  DOWNSTREAM_TLS_VERSION: () => undefined,
  REQUESTED_SERVER_NAME: (c) => c.info.downstream.serverName || undefined,
  ROUTE_NAME: (c) => c.info.routeName || undefined,
  CONNECTION_TERMINATION_DETAILS: (c) => c.info.connectionTerminationDetails || undefined,
  HOSTNAME: () => HOSTNAME,
  UPSTREAM_REMOTE_ADDRESS: (c) => c.info.upstreamHost || undefined,
  REQUEST_DURATION: (c) => num(c.info.durationMs()),
  RESPONSE_DURATION: (c) => num(c.info.durationMs()),
  CONNECTION_ID: () => undefined,
};

/** Envoy's compile step: throws ConfigError for an unknown command or an unterminated expression. */
export function compileFormat(format: string, where: string, hook?: CommandHook): Piece[] {
  const out: Piece[] = [];
  let lit = '';
  let i = 0;
  while (i < format.length) {
    const c = format[i]!;
    if (c !== '%') {
      lit += c;
      i++;
      continue;
    }
    if (format[i + 1] === '%') {
      lit += '%';
      i += 2;
      continue;
    }
    const end = format.indexOf('%', i + 1);
    if (end < 0) throw new ConfigError(`${where}: Incorrect configuration: ${format}. Couldn't find valid command at position ${i}`);
    const expr = format.slice(i + 1, end);
    const m = /^([A-Z_0-9]+)(?:\((.*)\))?(?::(\d+))?$/.exec(expr);
    if (!m) throw new ConfigError(`${where}: Incorrect configuration: ${format}. Couldn't find valid command at position ${i}`);
    const [, cmd, arg, maxLen] = m as unknown as [string, string, string | undefined, string | undefined];
    let piece: CommandFn;
    const hooked = hook?.(cmd, arg, where);
    if (hooked) {
      piece = hooked;
    } else if (cmd === 'REQ' || cmd === 'RESP' || cmd === 'TRAILER') {
      if (arg === undefined) throw new ConfigError(`${where}: ${cmd} requires a header name`);
      piece = headerCommand(arg, cmd === 'REQ' ? 'request' : cmd === 'RESP' ? 'response' : 'trailers', cmd);
    } else if (cmd === 'REQ_WITHOUT_QUERY') {
      if (arg === undefined) throw new ConfigError(`${where}: ${cmd} requires a header name`);
      piece = withoutQuery(headerCommand(arg, 'request', cmd));
    } else if (cmd === 'FILTER_STATE') {
      if (!arg) throw new ConfigError(`${where}: FILTER_STATE requires a key`);
      piece = filterStateCommand(arg, where);
    } else if (cmd === 'START_TIME') {
      piece = startTime(arg);
    } else if (cmd === 'DYNAMIC_METADATA') {
      if (!arg) throw new ConfigError(`${where}: DYNAMIC_METADATA requires a namespace`);
      piece = dynamicMetadata(arg);
    } else if (cmd === 'ENVIRONMENT') {
      const v = process.env[arg ?? ''];
      piece = () => v;
    } else if (SIMPLE[cmd] && arg === undefined) {
      piece = SIMPLE[cmd]!;
    } else if (!SIMPLE[cmd] && ENVOY_STREAM_INFO_COMMANDS.has(cmd)) {
      // Envoy serves this command; the engine has no value for it yet: "-" rather than refusing the config
      piece = () => undefined;
    } else {
      throw new ConfigError(`${where}: Not supported field in StreamInfo: ${cmd}`);
    }
    if (maxLen !== undefined) {
      const n = Number(maxLen);
      const inner = piece;
      piece = (c) => inner(c)?.slice(0, n);
    }
    if (lit) out.push(lit);
    lit = '';
    out.push(piece);
    i = end + 1;
  }
  if (lit) out.push(lit);
  return out;
}

/** `-` for missing values (access logs), or `empty` (omit_empty_values: ''). */
export function formatLog(pieces: readonly Piece[], c: FormatContext, empty = '-'): string {
  let s = '';
  for (const p of pieces) {
    if (typeof p === 'string') s += p;
    else {
      const v = p(c);
      s += v === undefined || v === '' ? empty : v;
    }
  }
  return s;
}

/** Empty for missing values (header values). */
export function formatHeader(pieces: readonly Piece[], c: FormatContext): string {
  let s = '';
  for (const p of pieces) s += typeof p === 'string' ? p : (p(c) ?? '');
  return s;
}

/** Options of an access-log JSON format (SubstitutionFormatString). */
export interface JsonFormatOptions {
  hook?: CommandHook;
}

function sortedKeys(o: Record<string, JsonValue>): string[] {
  return Object.keys(o).sort();
}

/**
 * Values of access-log JSON formats: a string that is one command keeps the command's type (numbers stay numbers)
 * and is null without a value; other strings are formats (a missing command prints nothing); other JSON passes through.
 * Keys come out sorted at every level and omit_empty_values changes nothing here, as Envoy 1.36 writes them
 * (checked against it: test/e2e/access-log-formats.test.ts).
 */
export function compileJsonFormat(obj: Record<string, JsonValue>, where: string, o: JsonFormatOptions = {}): (c: FormatContext) => string {
  type Fn = (c: FormatContext) => JsonValue;
  const compileValue = (v: JsonValue, w: string): Fn => {
    if (typeof v === 'string') {
      const pieces = compileFormat(v, w, o.hook);
      const single = pieces.length === 1 && typeof pieces[0] !== 'string' ? pieces[0] : undefined;
      if (single) {
        return (c) => {
          const r = single(c);
          if (r === undefined || r === '') return null;
          // Envoy keeps numbers typed in JSON logs
          return /^-?\d+$/.test(r) && r.length < 16 ? Number(r) : r;
        };
      }
      if (pieces.length <= 1) return () => v;
      return (c) => formatHeader(pieces, c);
    }
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      const entries = sortedKeys(v).map((k) => [k, compileValue(v[k]!, `${w}.${k}`)] as const);
      return (c) => {
        const out: Record<string, JsonValue> = {};
        for (const [k, f] of entries) out[k] = f(c);
        return out;
      };
    }
    return () => v;
  };
  const root = compileValue(obj, where);
  return (c) => `${JSON.stringify(root(c))}\n`;
}
