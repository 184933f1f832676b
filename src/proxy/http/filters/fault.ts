// envoy.filters.http.fault: delays and aborts by percentage (per-route config replaces the filter's,
// which is how Istio configures it), honouring upstream_cluster, headers and max_active_faults.
import { create } from '@bufbuild/protobuf';
import { anyUnpack, type Any } from '@bufbuild/protobuf/wkt';
import { HTTPFaultSchema, type HTTPFault } from '../../../gen/envoy/extensions/filters/http/fault/v3/fault_pb';
import { ConfigError } from '../../common/config-error';
import { durationToMs } from '../../common/duration';
import { compileHeaderMatcher, fractionOf, type HeaderPredicate } from '../../route/match';
import type { Counter, Gauge } from '../../stats/store';
import type { FilterResult, HttpFilter, HttpFilterFactory, HttpStream, LocalReply } from '../filter-api';

export const FAULT_FILTER = 'envoy.filters.http.fault';

interface FaultConfig {
  delayMs: number | undefined;
  delayHeader: boolean;
  delayFraction: number;
  abortStatus: number | undefined;
  abortGrpc: number | undefined;
  abortHeader: boolean;
  abortFraction: number;
  upstreamCluster: string;
  headers: HeaderPredicate[];
  downstreamNodes: ReadonlySet<string>;
  maxActiveFaults: number | undefined;
}

function compile(f: HTTPFault, where: string): FaultConfig {
  const d = f.delay;
  const a = f.abort;
  if (f.responseRateLimit) throw new ConfigError(`${where}.response_rate_limit: not supported`);
  let abortStatus: number | undefined;
  let abortGrpc: number | undefined;
  if (a?.errorType.case === 'httpStatus') {
    abortStatus = a.errorType.value;
    if (abortStatus < 200 || abortStatus >= 600) throw new ConfigError(`${where}.abort.http_status: value must be inside range [200, 600)`);
  } else if (a?.errorType.case === 'grpcStatus') abortGrpc = a.errorType.value;
  return {
    delayMs: d?.faultDelaySecifier.case === 'fixedDelay' ? durationToMs(d.faultDelaySecifier.value) : undefined,
    delayHeader: d?.faultDelaySecifier.case === 'headerDelay',
    delayFraction: fractionOf(d?.percentage, d ? 1 : 0),
    abortStatus,
    abortGrpc,
    abortHeader: a?.errorType.case === 'headerAbort',
    abortFraction: fractionOf(a?.percentage, a ? 1 : 0),
    upstreamCluster: f.upstreamCluster,
    headers: f.headers.map((h, i) => compileHeaderMatcher(h, `${where}.headers[${i}]`)),
    downstreamNodes: new Set(f.downstreamNodes),
    maxActiveFaults: f.maxActiveFaults,
  };
}

function decode(any: Any | undefined, where: string): FaultConfig {
  if (!any) return compile(create(HTTPFaultSchema, {}), where);
  const f = anyUnpack(any, HTTPFaultSchema);
  if (!f) throw new ConfigError(`${where}: cannot decode ${any.typeUrl} as ${HTTPFaultSchema.typeName}`);
  return compile(f, where);
}

class FaultFilter implements HttpFilter {
  private active = 0;
  constructor(
    private readonly name: string,
    private readonly base: FaultConfig,
    private readonly stats: { delays: Counter; aborts: Counter; active: Gauge; overflow: Counter },
  ) {}

  decodeHeaders(s: HttpStream): FilterResult | Promise<FilterResult> {
    const cfg = s.perFilterConfig<FaultConfig>(this.name) ?? this.base;
    if (cfg.delayMs === undefined && !cfg.delayHeader && cfg.abortStatus === undefined && cfg.abortGrpc === undefined && !cfg.abortHeader)
      return undefined;
    if (cfg.upstreamCluster) {
      const sel = s.route();
      const a = sel?.route.action;
      if (!a || a.kind !== 'route' || a.cluster.kind !== 'cluster' || a.cluster.name !== cfg.upstreamCluster) return undefined;
    }
    for (const h of cfg.headers) if (!h(s.request)) return undefined;
    if (cfg.downstreamNodes.size > 0 && !cfg.downstreamNodes.has(s.request.get('x-envoy-downstream-service-node') ?? '')) return undefined;
    if (cfg.maxActiveFaults !== undefined && this.active >= cfg.maxActiveFaults) {
      this.stats.overflow.inc();
      return undefined;
    }
    let delay: number | undefined;
    if (Math.random() < cfg.delayFraction) {
      if (cfg.delayHeader) {
        const v = s.request.get('x-envoy-fault-delay-request');
        if (v !== undefined && /^\d+$/.test(v)) delay = Number(v);
      } else delay = cfg.delayMs;
    }
    const abort = this.abortFor(cfg, s);
    if (delay === undefined || delay <= 0) {
      if (abort) this.stats.aborts.inc();
      return abort;
    }
    this.stats.delays.inc();
    s.info.setFlag('DI');
    this.active++;
    this.stats.active.set(this.active);
    return new Promise((resolve) =>
      setTimeout(() => {
        this.active--;
        this.stats.active.set(this.active);
        if (abort) this.stats.aborts.inc();
        resolve(abort);
      }, delay),
    );
  }

  private abortFor(cfg: FaultConfig, s: HttpStream): LocalReply | undefined {
    if (!(Math.random() < cfg.abortFraction)) return undefined;
    let status = cfg.abortStatus;
    let grpc = cfg.abortGrpc;
    if (cfg.abortHeader) {
      const h = s.request.get('x-envoy-fault-abort-request');
      const g = s.request.get('x-envoy-fault-abort-grpc-request');
      if (h !== undefined && /^\d+$/.test(h)) status = Number(h);
      if (g !== undefined && /^\d+$/.test(g)) grpc = Number(g);
    }
    if (status === undefined && grpc === undefined) return undefined;
    return {
      status: status ?? 200,
      body: 'fault filter abort',
      flag: 'FI',
      details: 'fault_filter_abort',
      ...(grpc !== undefined ? { grpcStatus: grpc } : {}),
    };
  }
}

export const faultFilterFactory: HttpFilterFactory = {
  name: FAULT_FILTER,
  configTypes: [HTTPFaultSchema.typeName],
  create(config, ctx) {
    const base = decode(config, ctx.where);
    const s = ctx.stats.scope('fault.');
    return new FaultFilter(ctx.filterName, base, {
      delays: s.counter('delays_injected'),
      aborts: s.counter('aborts_injected'),
      active: s.gauge('active_faults'),
      overflow: s.counter('faults_overflow'),
    });
  },
  parsePerRoute(config, where) {
    return decode(config, where);
  },
};
