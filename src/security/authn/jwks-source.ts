// Where a jwt_authn provider gets its keys (the jwks branch of Istio convertToEnvoyJwtConfig): inlined
// by the daemon (local_jwks), or fetched by the proxy through a cluster (remote_jwks), depending on
// PILOT_JWT_ENABLE_REMOTE_JWKS and on whether the key server is a service of the registry.
import type { JWTRule } from '../../config/types';
import type { PushContext } from '../../discovery/push-context';
import { registerScope } from '../../lib/log';
import { buildSubsetKey, durationMs } from '../../xds/gen/common';
import type { JwksFetchMode } from '../jwks/mode';
import type { JwksResolver, LocalJwksSource } from '../jwks/resolver';

const log = registerScope('authn', 'authn debugging');

/** Istio's RemoteJwks cache_duration. */
export const REMOTE_JWKS_CACHE_DURATION_MS = 5 * 60_000;

export interface JwksInfo {
  hostname: string;
  port: number;
  scheme: 'http' | 'https';
}

/** Istio security.ParseJwksURI: scheme http (port 80) or https (443), an explicit port wins. */
export function parseJwksUri(uri: string): JwksInfo {
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    throw new Error(`parse ${JSON.stringify(uri)}: invalid URI`);
  }
  const scheme = u.protocol.slice(0, -1);
  if (scheme !== 'http' && scheme !== 'https') throw new Error(`URI scheme ${JSON.stringify(scheme)} is not supported`);
  const port = u.port !== '' ? Number(u.port) : scheme === 'https' ? 443 : 80;
  // URL keeps IPv6 brackets in hostname; Go's Hostname() does not.
  const hostname = u.hostname.replace(/^\[(.*)\]$/, '$1');
  return { hostname, port, scheme };
}

/**
 * Istio model.LookupCluster: the outbound cluster of the registry service with that hostname when exactly
 * one namespace has one; an error naming the problem otherwise.
 */
export function lookupCluster(push: PushContext, hostname: string, port: number): { cluster: string } | { error: string } {
  if (hostname === '') return { error: 'service must not be empty' };
  const services = push.servicesByHostname(hostname);
  const namespaces = [...new Set(services.map((s) => s.namespace))].sort();
  if (namespaces.length > 1) {
    return {
      error: `found ${hostname} in multiple namespaces [${namespaces.join(' ')}], specify the namespace explicitly in the format of <Namespace>/<Hostname>`,
    };
  }
  if (namespaces.length === 0) return { error: `could not find service ${hostname} in the service registry` };
  return { cluster: buildSubsetKey('outbound', '', services[0]!.hostname, port) };
}

export interface JwksSourceContext {
  mode: JwksFetchMode;
  resolver: JwksResolver;
  push: PushContext;
}

export type JwksSource = LocalJwksSource;

function remoteJwks(uri: string, cluster: string, timeoutMs: number): JwksSource {
  return {
    case: 'remoteJwks',
    value: {
      httpUri: { uri, httpUpstreamType: { case: 'cluster', value: cluster }, timeout: durationMs(timeoutMs) },
      cacheDuration: durationMs(REMOTE_JWKS_CACHE_DURATION_MS),
    },
  };
}

/** Who fetches a rule's keys: the daemon (inlined), or the proxy through `cluster`. */
export type JwksPlan = { by: 'daemon' } | { by: 'proxy'; cluster: string };

/** The decision of Istio convertToEnvoyJwtConfig, logging as Istio does when an envoy-mode lookup fails. */
export function planJwks(rule: JWTRule, ctx: Pick<JwksSourceContext, 'mode' | 'push'>, quiet = false): JwksPlan {
  const uri = rule.jwksUri ?? '';
  if (ctx.mode === 'istiod' || uri === '') return { by: 'daemon' };
  let info: JwksInfo | undefined;
  try {
    info = parseJwksUri(uri);
  } catch (e) {
    if (!quiet) log.error(`Failed to parse jwt rule jwks uri ${(e as Error).message}`);
  }
  const found = info ? lookupCluster(ctx.push, info.hostname, info.port) : { error: `invalid jwks uri ${uri}` };
  if ('cluster' in found) return { by: 'proxy', cluster: found.cluster };
  // Hybrid: a key server outside the registry has no cluster, so the daemon fetches it.
  if (ctx.mode === 'hybrid') return { by: 'daemon' };
  if (!quiet) {
    log.error(
      `Failed to look up Envoy cluster ${found.error}. Please create ServiceEntry to register external JWKs server or set PILOT_JWT_ENABLE_REMOTE_JWKS to hybrid/istiod mode.`,
    );
  }
  // Envoy mode keeps the proxy fetching, through the cluster the registry would have had.
  return { by: 'proxy', cluster: buildSubsetKey('outbound', '', info?.hostname ?? '', info?.port ?? 0) };
}

/** The jwks_source_specifier of one rule's provider. */
export function jwksSource(rule: JWTRule, timeoutMs: number, ctx: JwksSourceContext): JwksSource {
  const uri = rule.jwksUri ?? '';
  const plan = planJwks(rule, ctx);
  if (plan.by === 'proxy') return remoteJwks(uri, plan.cluster, timeoutMs);
  // Istio's hybrid fallback ignores inline `jwks` (a rule with both is warned about at validation).
  const inline = ctx.mode === 'hybrid' && uri !== '' ? undefined : rule.jwks;
  return ctx.resolver.buildLocalJwks(uri, rule.issuer, inline, timeoutMs);
}
