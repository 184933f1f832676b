// The listener filters that read a connection's first bytes (Envoy's tls_inspector and http_inspector): which of
// them run for a destination port, and the read itself, bounded by listener_filters_timeout, until the bytes
// decide what chain selection and the codec need (TLS ClientHello: SNI and ALPN; HTTP/1 or the HTTP/2 preface).
import type net from 'node:net';
import type { Listener } from '../../gen/envoy/config/listener/v3/listener_pb';
import type { Counter, Gauge } from '../stats/store';
import { compileFilterDisabled } from './chain-match';
import { parseClientHello, sniffHttp, sniffHttpHost, type Sniffed } from './sniff';

export interface Inspectors {
  tls: boolean;
  http: boolean;
}

export /**
 * The tls_inspector and http_inspector listener filters, each off where its filter_disabled says so.
 * Like Envoy, a TLS inspector is assumed when chains match on SNI / transport protocol / ALPN and the
 * listener names none; listeners that name no inspector at all keep HTTP sniffing for chains matching
 * on application protocols (configs written for this engine before inspectors were honoured).
 */
function inspectorsOf(proto: Listener, needed: { tls: boolean; http: boolean }, where: string): (port: number) => Inspectors {
  let tls: ((port: number) => boolean) | undefined;
  let http: ((port: number) => boolean) | undefined;
  proto.listenerFilters.forEach((f, i) => {
    const t = f.configType.case === 'typedConfig' ? f.configType.value.typeUrl : '';
    const disabled = compileFilterDisabled(f.filterDisabled, `${where}.listener_filters[${i}].filter_disabled`);
    if (t.endsWith('.tls_inspector.v3.TlsInspector') || (!t && f.name === 'envoy.filters.listener.tls_inspector')) tls = disabled;
    else if (t.endsWith('.http_inspector.v3.HttpInspector') || (!t && f.name === 'envoy.filters.listener.http_inspector')) http = disabled;
  });
  const anyInspector = tls !== undefined || http !== undefined;
  const tlsOff = tls;
  const httpOff = http;
  return (port) => ({
    tls: tlsOff ? !tlsOff(port) : needed.tls,
    // an HTTP inspector whose result no chain looks at is skipped: server-first protocols are not held
    http: needed.http && (httpOff ? !httpOff(port) : !anyInspector),
  });
}

export interface PeekOptions {
  stats: { preCxActive: Gauge; preCxTimeout: Counter };
  /** listener_filters_timeout in ms (0: none). */
  timeoutMs: number;
  /** continue_on_listener_filters_timeout: pick a chain with what was read instead of closing. */
  continueOnTimeout: boolean;
}

/** Reads until the first bytes decide what the chain selection and codec need. */
export function peekFirstBytes(
  socket: net.Socket,
  head: Buffer | undefined,
  needHost: boolean,
  insp: Inspectors,
  o: PeekOptions,
  done: (buf: Buffer, s: Sniffed, host: { host: string; port: number } | undefined) => void,
): void {
  let buf = head ?? Buffer.alloc(0);
  o.stats.preCxActive.inc();
  let finished = false;
  let timer: NodeJS.Timeout | undefined;
  const finish = (s: Sniffed, host: { host: string; port: number } | undefined) => {
    if (finished) return;
    finished = true;
    if (timer) clearTimeout(timer);
    socket.removeListener('data', onData);
    socket.removeListener('end', onEnd);
    socket.pause();
    o.stats.preCxActive.dec();
    done(buf, s, host);
  };
  const evaluate = (final: boolean): void => {
    if (buf.length === 0) {
      if (final) finish({ kind: 'raw', alpn: [] }, undefined);
      return;
    }
    let s: Sniffed;
    // the destination guess reads HTTP/1 and TLS whatever the inspectors say (it needs the Host or SNI)
    if (buf[0] === 0x16 && (insp.tls || needHost)) s = parseClientHello(buf);
    // read even without http_inspector: the HCM's AUTO codec tells HTTP/2 by its preface the same way
    else s = sniffHttp(buf);
    if (s.kind === 'more' && !final) return;
    if (s.kind === 'more') s = { kind: 'raw', alpn: [] };
    let host: { host: string; port: number } | undefined;
    if (needHost && s.kind === 'raw' && s.alpn.some((a) => a.startsWith('http/1'))) {
      const h = sniffHttpHost(buf, 80);
      if (h === 'more' && !final) return;
      host = h === 'more' ? undefined : h;
    }
    finish(s, host);
  };
  const onData = (d: Buffer) => {
    buf = buf.length === 0 ? d : Buffer.concat([buf, d]);
    evaluate(false);
  };
  const onEnd = () => evaluate(true);
  if (o.timeoutMs > 0) {
    timer = setTimeout(() => {
      o.stats.preCxTimeout.inc();
      if (o.continueOnTimeout) evaluate(true);
      else {
        finished = true;
        o.stats.preCxActive.dec();
        socket.destroy();
      }
    }, o.timeoutMs);
  }
  socket.on('data', onData);
  socket.once('end', onEnd);
  // a handed-off socket was paused by the listener that inspected it first
  if (socket.isPaused()) socket.resume();
  socket.once('close', () => {
    if (!finished) {
      finished = true;
      if (timer) clearTimeout(timer);
      o.stats.preCxActive.dec();
    }
  });
  if (buf.length > 0) evaluate(false);
}
