// How a sidecar's inbound port is split into filter chains by PeerAuthentication mode and protocol (Istio
// pilot/pkg/networking/core filterchain_options.go, listener.go ALPN sets), and which listener filters the
// resulting chains need (listener_inbound.go populateListenerFilters). Pure tables: lds.ts builds the chains.
import { create } from '@bufbuild/protobuf';
import type { MutualTlsMode } from '../../discovery/push/peer-authentication';
import {
  ListenerFilterChainMatchPredicateSchema,
  ListenerFilterSchema,
  type FilterChain,
  type ListenerFilter,
  type ListenerFilterChainMatchPredicate,
} from '../../gen/envoy/config/listener/v3/listener_components_pb';
import { HttpInspectorSchema } from '../../gen/envoy/extensions/filters/listener/http_inspector/v3/http_inspector_pb';
import { TlsInspectorSchema } from '../../gen/envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector_pb';
import { pack, WK } from './common';

/** Istio ListenerProtocol: HTTP ports, TCP ports, and sniffed ports (AUTO: both). */
export type ListenerProtocol = 'HTTP' | 'TCP' | 'AUTO';

export const TLS_TRANSPORT = 'tls';
export const RAW_BUFFER_TRANSPORT = 'raw_buffer';

/** ALPNs the client sidecar's outbound sends over mTLS for HTTP it detected (Istio mtlsHTTPALPNs). */
export const MTLS_HTTP_ALPNS = ['istio-http/1.0', 'istio-http/1.1', 'istio-h2'];
/** Every ALPN an Istio client sends over mesh mTLS (allIstioMtlsALPNs). */
export const ALL_ISTIO_MTLS_ALPNS = ['istio', 'istio-peer-exchange', 'istio-http/1.0', 'istio-http/1.1', 'istio-h2'];
/** TCP over mTLS from a sidecar with metadata exchange (mtlsTCPWithMxcALPNs). */
export const MTLS_TCP_WITH_MXC_ALPNS = ['istio-peer-exchange', 'istio'];

/** What the HTTP inspector reports for plaintext HTTP (plaintextHTTPALPNs; HTTP/1.0 only with PILOT_HTTP10). */
export function plaintextHttpAlpns(http10: boolean): string[] {
  return http10 ? ['http/1.0', 'http/1.1', 'h2c'] : ['http/1.1', 'h2c'];
}

/** Istio FilterChainMatchOptions: one filter chain of a port. */
export interface FilterChainMatchOption {
  applicationProtocols: readonly string[];
  transportProtocol: string;
  protocol: 'HTTP' | 'TCP';
  /** The chain terminates mesh mTLS. */
  tls: boolean;
}

const opt = (
  protocol: 'HTTP' | 'TCP',
  transportProtocol: string,
  tls: boolean,
  applicationProtocols: readonly string[] = [],
): FilterChainMatchOption => ({
  applicationProtocols,
  transportProtocol,
  protocol,
  tls,
});

/**
 * Istio getFilterChainMatchOptions. STRICT: only TLS chains. PERMISSIVE: mTLS chains matched on Istio's ALPNs
 * beside plaintext chains (and, for TCP/sniffed ports, a chain passing through TLS that is not mesh mTLS).
 * DISABLE (or unknown): plaintext only.
 */
export function filterChainMatchOptions(mode: MutualTlsMode, protocol: ListenerProtocol, http10 = false): FilterChainMatchOption[] {
  const plainHttp = plaintextHttpAlpns(http10);
  switch (protocol) {
    case 'HTTP':
      if (mode === 'STRICT') return [opt('HTTP', TLS_TRANSPORT, true)];
      if (mode === 'PERMISSIVE') return [opt('HTTP', TLS_TRANSPORT, true, ALL_ISTIO_MTLS_ALPNS), opt('HTTP', RAW_BUFFER_TRANSPORT, false)];
      return [opt('HTTP', RAW_BUFFER_TRANSPORT, false)];
    case 'AUTO':
      if (mode === 'STRICT') return [opt('HTTP', TLS_TRANSPORT, true, MTLS_HTTP_ALPNS), opt('TCP', TLS_TRANSPORT, true)];
      if (mode === 'PERMISSIVE') {
        return [
          opt('HTTP', TLS_TRANSPORT, true, MTLS_HTTP_ALPNS),
          opt('HTTP', RAW_BUFFER_TRANSPORT, false, plainHttp),
          opt('TCP', TLS_TRANSPORT, true, MTLS_TCP_WITH_MXC_ALPNS),
          opt('TCP', RAW_BUFFER_TRANSPORT, false),
          opt('TCP', TLS_TRANSPORT, false),
        ];
      }
      return [opt('HTTP', RAW_BUFFER_TRANSPORT, false, plainHttp), opt('TCP', RAW_BUFFER_TRANSPORT, false)];
    case 'TCP':
      if (mode === 'STRICT') return [opt('TCP', TLS_TRANSPORT, true)];
      if (mode === 'PERMISSIVE')
        return [opt('TCP', TLS_TRANSPORT, true, ALL_ISTIO_MTLS_ALPNS), opt('TCP', TLS_TRANSPORT, false), opt('TCP', RAW_BUFFER_TRANSPORT, false)];
      return [opt('TCP', RAW_BUFFER_TRANSPORT, false)];
  }
}

// ---------------------------------------------------------------------------------------------
// listener filters

interface Inspectors {
  tls: boolean;
  http: boolean;
}

/** Istio listenerPredicateExcludePorts: matches connections to any of the ports. */
function portsPredicate(ports: readonly number[]): ListenerFilterChainMatchPredicate {
  const ranges = ports.map((p) =>
    create(ListenerFilterChainMatchPredicateSchema, { rule: { case: 'destinationPortRange', value: { start: p, end: p + 1 } } }),
  );
  if (ranges.length > 1) return create(ListenerFilterChainMatchPredicateSchema, { rule: { case: 'orMatch', value: { rules: ranges } } });
  return ranges[0]!;
}

function notPredicate(p: ListenerFilterChainMatchPredicate): ListenerFilterChainMatchPredicate {
  return create(ListenerFilterChainMatchPredicateSchema, { rule: { case: 'notMatch', value: p } });
}

function inspector(name: string, disabled: ListenerFilterChainMatchPredicate | undefined): ListenerFilter {
  const config = name === WK.tlsInspector ? pack(TlsInspectorSchema, {}) : pack(HttpInspectorSchema, {});
  return create(ListenerFilterSchema, {
    name,
    configType: { case: 'typedConfig', value: config },
    ...(disabled ? { filterDisabled: disabled } : {}),
  });
}

/**
 * Istio populateListenerFilters for a listener reached by redirection: original_dst, then the TLS inspector
 * where some chain matches a transport protocol `tls`, then the HTTP inspector where some chain matches
 * plaintext HTTP ALPNs — each switched off (filter_disabled) on ports whose chains do not need it. Port 0
 * stands for the chains without a destination port (the passthrough ones).
 */
export function inboundListenerFilters(
  chains: readonly FilterChain[],
  originalDst: ListenerFilter,
  after: readonly ListenerFilter[] = [],
): ListenerFilter[] {
  const byPort = new Map<number, Inspectors>();
  for (const fc of chains) {
    const m = fc.filterChainMatch;
    const port = m?.destinationPort ?? 0;
    const needsTls = m?.transportProtocol === TLS_TRANSPORT;
    const needsHttp = (m?.applicationProtocols ?? []).some((a) => a === 'http/1.1' || a === 'h2c');
    const i = byPort.get(port) ?? { tls: false, http: false };
    byPort.set(port, { tls: i.tls || needsTls, http: i.http || needsHttp });
  }
  const out: ListenerFilter[] = [originalDst, ...after];
  const sorted = [...byPort.keys()].sort((a, b) => a - b);
  if ([...byPort.values()].some((i) => i.tls)) {
    const defaultEnabled = byPort.get(0)?.tls ?? false;
    // With the passthrough chains inspecting, ports opt out; otherwise ports opt in.
    const ports = sorted.filter((p) => p !== 0 && byPort.get(p)!.tls !== defaultEnabled);
    out.push(
      inspector(WK.tlsInspector, ports.length === 0 ? undefined : defaultEnabled ? portsPredicate(ports) : notPredicate(portsPredicate(ports))),
    );
  }
  // After the TLS inspector: once it sets the transport protocol to tls, the HTTP inspector leaves the bytes alone.
  if ([...byPort.values()].some((i) => i.http)) {
    const ports = sorted.filter((p) => !byPort.get(p)!.http);
    out.push(inspector(WK.httpInspector, ports.length === 0 ? undefined : portsPredicate(ports)));
  }
  return out;
}
