// The engine's config sources: one ADS stream (dynamic_resources.ads_config) and one SDS stream per static
// cluster that an SdsSecretConfig names through api_config_source, as Envoy's GrpcMux per config source.
// Every mux is relayed to engine worker threads (the main thread's pool, or a worker's link to the main thread).
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { Registry } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import type { Bootstrap } from '../../gen/envoy/config/bootstrap/v3/bootstrap_pb';
import type { Node } from '../../gen/envoy/config/core/v3/base_pb';
import type { ConfigSource } from '../../gen/envoy/config/core/v3/config_source_pb';
import type { Cluster } from '../../gen/envoy/config/cluster/v3/cluster_pb';
import { UpstreamTlsContextSchema } from '../../gen/envoy/extensions/transport_sockets/tls/v3/tls_pb';
import { joinHostPort } from '../../lib/hostport';
import { ConfigError } from '../common/config-error';
import { readDataSource } from '../common/data-source';
import type { LoggerRegistry } from '../log';
import type { StatsStore } from '../stats/store';
import { GrpcMux } from '../xds/grpc-mux';

/** gRPC target and credentials of a static cluster used as a config source. */
function grpcTarget(c: Cluster, where: string): { target: string; credentials: grpc.ChannelCredentials; options: grpc.ChannelOptions } {
  const ep = c.loadAssignment?.endpoints[0]?.lbEndpoints[0];
  const a = ep?.hostIdentifier.case === 'endpoint' ? ep.hostIdentifier.value.address?.address : undefined;
  let target: string;
  if (a?.case === 'pipe') target = `unix:${path.resolve(a.value.path)}`;
  else if (a?.case === 'socketAddress' && a.value.portSpecifier.case === 'portValue') {
    const h = a.value.address;
    target = joinHostPort(h, a.value.portSpecifier.value);
  } else throw new ConfigError(`${where}: cluster '${c.name}' has no address to connect to`);
  let credentials = grpc.credentials.createInsecure();
  const options: grpc.ChannelOptions = {};
  const ts = c.transportSocket;
  if (ts?.configType.case === 'typedConfig' && ts.configType.value.typeUrl.endsWith('UpstreamTlsContext')) {
    const u = anyUnpack(ts.configType.value, UpstreamTlsContextSchema);
    const common = u?.commonTlsContext;
    const cert = common?.tlsCertificates[0];
    const vc = common?.validationContextType;
    const ca =
      vc?.case === 'validationContext'
        ? readDataSource(vc.value.trustedCa, `${where}.trusted_ca`)
        : vc?.case === 'combinedValidationContext'
          ? readDataSource(vc.value.defaultValidationContext?.trustedCa, `${where}.trusted_ca`)
          : undefined;
    credentials = grpc.credentials.createSsl(
      ca ?? null,
      readDataSource(cert?.privateKey, `${where}.private_key`) ?? null,
      readDataSource(cert?.certificateChain, `${where}.certificate_chain`) ?? null,
    );
    if (u?.sni) options['grpc.ssl_target_name_override'] = u.sni;
  }
  return { target, credentials, options };
}

export interface SourcesContext {
  node: Node;
  loggers: LoggerRegistry;
  stats: StatsStore;
  typeRegistry: Registry;
  backoff: { baseMs: number; maxMs: number };
  /** In a worker thread: muxes relay what the main thread's streams receive instead of opening their own. */
  relay: boolean;
}

export class ConfigSources {
  readonly ads: GrpcMux | undefined;
  /** SDS muxes by static cluster name. */
  readonly sds = new Map<string, GrpcMux>();
  /** Every mux, in the order made (closed in that order). */
  private readonly all: GrpcMux[] = [];
  private readonly staticByName: Map<string, Cluster>;
  /** Where a new mux is handed for worker threads; unset until there is somewhere to hand it. */
  relayTo: ((key: string, mux: GrpcMux) => void) | undefined;

  constructor(
    bootstrap: Bootstrap,
    private readonly ctx: SourcesContext,
  ) {
    this.staticByName = new Map((bootstrap.staticResources?.clusters ?? []).map((c) => [c.name, c]));
    const ads = bootstrap.dynamicResources?.adsConfig;
    if (!ads) return;
    const svc = ads.grpcServices[0]!;
    let t: { target: string; credentials: grpc.ChannelCredentials };
    if (svc.targetSpecifier.case === 'envoyGrpc')
      t = grpcTarget(this.staticByName.get(svc.targetSpecifier.value.clusterName)!, 'dynamic_resources.ads_config');
    else if (svc.targetSpecifier.case === 'googleGrpc')
      t = { target: svc.targetSpecifier.value.targetUri, credentials: grpc.credentials.createInsecure() };
    else throw new ConfigError('dynamic_resources.ads_config.grpc_services[0]: envoy_grpc or google_grpc is required');
    this.ads = new GrpcMux({
      target: t.target,
      credentials: t.credentials,
      node: ctx.node,
      service: 'ads',
      setNodeOnFirstMessageOnly: ads.setNodeOnFirstMessageOnly,
      log: ctx.loggers.get('config'),
      controlPlaneStats: ctx.stats.scope('control_plane.'),
      typeRegistry: ctx.typeRegistry,
      backoffBaseMs: ctx.backoff.baseMs,
      backoffMaxMs: ctx.backoff.maxMs,
      relay: ctx.relay,
    });
    this.all.push(this.ads);
  }

  /** The mux of a ConfigSource (the secret manager's resolver): ADS, or the SDS stream to a static cluster. */
  readonly resolve = (source: ConfigSource, where: string): { key: string; mux: GrpcMux } => {
    const k = source.configSourceSpecifier;
    if (k.case === 'ads') {
      if (!this.ads) throw new ConfigError(`${where}: ads config source used but dynamic_resources.ads_config is not set`);
      return { key: 'ads', mux: this.ads };
    }
    if (k.case === 'apiConfigSource') {
      const g = k.value.grpcServices[0];
      if (g?.targetSpecifier.case !== 'envoyGrpc') throw new ConfigError(`${where}.api_config_source: only envoy_grpc services are supported`);
      const name = g.targetSpecifier.value.clusterName;
      const c = this.staticByName.get(name);
      if (!c)
        throw new ConfigError(
          `${where}.api_config_source: envoy.config.core.v3.ApiConfigSource must have a statically defined non-EDS cluster: '${name}' does not exist, was added via api, or is an EDS cluster`,
        );
      let m = this.sds.get(name);
      if (!m) {
        const t = grpcTarget(c, where);
        const x = this.ctx;
        m = new GrpcMux({
          target: t.target,
          credentials: t.credentials,
          node: x.node,
          service: 'sds',
          setNodeOnFirstMessageOnly: k.value.setNodeOnFirstMessageOnly,
          log: x.loggers.get('secret'),
          typeRegistry: x.typeRegistry,
          backoffBaseMs: x.backoff.baseMs,
          backoffMaxMs: x.backoff.maxMs,
          relay: x.relay,
        });
        this.relayTo?.(name, m);
        this.sds.set(name, m);
        this.all.push(m);
      }
      return { key: name, mux: m };
    }
    throw new ConfigError(`${where}: only ADS and gRPC api_config_source are supported for secrets`);
  };

  /** Hands every mux made so far to `to`, and each later one as it is made. */
  relayAllTo(to: (key: string, mux: GrpcMux) => void): void {
    this.relayTo = to;
    if (this.ads) to('ads', this.ads);
    for (const [k, m] of this.sds) to(k, m);
  }

  close(): void {
    for (const m of this.all) m.close();
  }
}
