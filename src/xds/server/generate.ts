// Answers of the ADS server (Istio's DiscoveryServer generation and send, pilot/pkg/xds/xdsgen.go): the
// generator for a proxy and type, its resources for a watch (hashed, by-name watches cut to what they ask
// for), and the SotW or delta response written with its nonce, version and control plane, timed and counted.
// A generator's failure is counted and logged while the stream stays up; a write past its deadline ends it.
import { randomUUID } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import { ControlPlaneSchema, type ControlPlane } from '../../gen/envoy/config/core/v3/base_pb';
import type { Proxy } from '../../discovery/model';
import { registerScope } from '../../lib/log/index';
import type { Generator, PushRequest, Resource, WatchedResource } from '../types';
import { TYPE_URL } from '../../lib/xds/type-urls';
import type { XdsConnection } from './connection';
import { deltaRecordSent, type DeltaDiff } from './delta';
import { encodeDeltaDiscoveryResponse, encodeDiscoveryResponse } from './encode';
import { configSizeBytes, recordPush, recordSendError, responseWriteTimeouts, sendTime, totalXdsInternalErrors } from './metrics';
import type { GeneratorTable } from './options';
import { PROXY_REQUEST_TRIGGER } from './push-request';
import { hashResource, totalSize, type HashedResource } from './resources';
import type { AdsSettings } from './settings';
import { sotwRecordSent } from './sotw';
import { isWildcardType, shortType } from '../../lib/xds/type-urls';
import { watchedResource, type WatchState } from './watch';

const log = registerScope('ads', 'ads debugging');
const deltaLog = registerScope('delta', 'delta xds debugging');

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export interface ResponderOptions<P> {
  generators: GeneratorTable<P>;
  settings: Readonly<AdsSettings>;
  now: () => number;
  controlPlaneIdentifier?: string;
  controlPlaneTypes?: ReadonlySet<string>;
  /** Ends a stream whose response could not be written in time. */
  close: (con: XdsConnection<P>, code: grpc.status, details: string) => void;
}

export class Responder<P extends { version: string }> {
  private readonly controlPlane: ControlPlane | undefined;

  constructor(private readonly o: ResponderOptions<P>) {
    this.controlPlane = o.controlPlaneIdentifier ? create(ControlPlaneSchema, { identifier: o.controlPlaneIdentifier }) : undefined;
  }

  generatorFor(proxy: Proxy, typeUrl: string): Generator<P> | undefined {
    const g = this.o.generators;
    return typeof g === 'function' ? g(proxy, typeUrl) : g[typeUrl];
  }

  /** The push request a proxy's own request is answered with: full, from the push it last got. */
  requestPushRequest(con: XdsConnection<P>): PushRequest<P> {
    return {
      full: true,
      configsUpdated: new Set(),
      edsUpdates: new Set(),
      reasons: new Map([[PROXY_REQUEST_TRIGGER, 1]]),
      push: (con.lastPush as { push: P }).push,
      start: this.o.now(),
    };
  }

  /**
   * Resources for a watch (or some of its names), hashed; undefined when the generator failed, which is
   * counted and logged while the stream stays up.
   */
  generate(con: XdsConnection<P>, gen: Generator<P>, w: WatchState, req: PushRequest<P>, only?: ReadonlySet<string>): HashedResource[] | undefined {
    const proxy = con.proxy as Proxy;
    let watch = watchedResource(w, only);
    if (w.typeUrl === TYPE_URL.virtualHost) watch = { ...watch, routeConfigs: con.watches.get(TYPE_URL.route)?.names ?? new Set() };
    try {
      // Reuse of generated output is the generators' (through the push context's xDS cache).
      const out = gen.generate(proxy, watch, req).resources;
      // A by-name watch gets only what it asked for.
      const wanted = watch.wildcard ? out : out.filter((r) => watch.resourceNames.has(r.name));
      return wanted.map(hashResource);
    } catch (err) {
      totalXdsInternalErrors.inc();
      log.error(`ADS:${shortType(w.typeUrl)}: generation failed for node:${con.conId}: ${errorMessage(err)}`);
      return undefined;
    }
  }

  /**
   * What a connection would be sent for a type from the current push, and its watch (a type it does not watch:
   * everything for wildcard types, nothing for by-name ones). undefined: no generator, or it failed.
   */
  resourcesFor(
    con: XdsConnection<P>,
    typeUrl: string,
    currentPush: () => { push: P; version: string },
  ): { version: string; resources: Resource[] } | undefined {
    const proxy = con.proxy as Proxy;
    const gen = this.generatorFor(proxy, typeUrl);
    if (!gen) return undefined;
    const current = currentPush();
    const w = con.watches.get(typeUrl);
    let watch: WatchedResource = w ? watchedResource(w) : { typeUrl, resourceNames: new Set(), wildcard: isWildcardType(typeUrl) };
    // Virtual hosts are those of the route configurations the proxy watches, as when they are pushed.
    if (typeUrl === TYPE_URL.virtualHost) watch = { ...watch, routeConfigs: con.watches.get(TYPE_URL.route)?.names ?? new Set() };
    if (!watch.wildcard && watch.resourceNames.size === 0) return { version: current.version, resources: [] };
    const req: PushRequest<P> = { ...this.requestPushRequest(con), push: current.push };
    try {
      const out = gen.generate(proxy, watch, req).resources;
      return { version: current.version, resources: watch.wildcard ? out : out.filter((r) => watch.resourceNames.has(r.name)) };
    } catch (err) {
      totalXdsInternalErrors.inc();
      log.error(`ADS:${shortType(typeUrl)}: generation failed for node:${con.conId}: ${errorMessage(err)}`);
      return undefined;
    }
  }

  private controlPlaneFor(typeUrl: string): ControlPlane | undefined {
    const only = this.o.controlPlaneTypes;
    return only && !only.has(typeUrl) ? undefined : this.controlPlane;
  }

  async sendSotw(
    con: XdsConnection<P>,
    w: WatchState,
    resources: readonly HashedResource[],
    generated: readonly HashedResource[],
    version: string,
    complete: boolean,
    what: string,
  ): Promise<boolean> {
    const nonce = randomUUID();
    const msg = () =>
      encodeDiscoveryResponse({ versionInfo: version, resources, typeUrl: w.typeUrl, nonce, controlPlane: this.controlPlaneFor(w.typeUrl) });
    // Recorded before the write: the client's answer can only be read after this task ends.
    w.nonceSent = nonce;
    w.versionSent = version;
    w.lastSendTime = this.o.now();
    sotwRecordSent(w, resources, complete, generated);
    const ok = await this.write(con, w.typeUrl, msg, resources, what, `version:${version} nonce:${nonce}`);
    return ok;
  }

  /**
   * `budgeted`: an answer to a request, written within the send budget. Proxies connecting at once are owed
   * all their config at once; pushes are already limited by PILOT_PUSH_THROTTLE.
   */
  async sendDelta(con: XdsConnection<P>, w: WatchState, diff: DeltaDiff, version: string, what: string, budgeted = false): Promise<boolean> {
    const nonce = randomUUID();
    const msg = () =>
      encodeDeltaDiscoveryResponse({
        systemVersionInfo: version,
        resources: diff.send,
        typeUrl: w.typeUrl,
        removedResources: diff.removed,
        nonce,
        controlPlane: this.controlPlaneFor(w.typeUrl),
      });
    w.nonceSent = nonce;
    w.versionSent = version;
    w.lastSendTime = this.o.now();
    deltaRecordSent(w, diff);
    return this.write(con, w.typeUrl, msg, diff.send, what, `removed:${diff.removed.length} version:${version} nonce:${nonce}`, budgeted);
  }

  private async write(
    con: XdsConnection<P>,
    typeUrl: string,
    encode: () => unknown,
    resources: readonly HashedResource[],
    what: string,
    detail: string,
    budgeted = false,
  ): Promise<boolean> {
    const timeoutMs = this.o.settings.sendTimeoutMs;
    // Send time counts from when the response may be written, not the wait for the send budget.
    let t0 = performance.now();
    const timed = (): unknown => {
      t0 = performance.now();
      return encode();
    };
    const result = budgeted ? await con.sendWithin(totalSize(resources), timed, timeoutMs) : await con.send(timed(), timeoutMs);
    const seconds = (performance.now() - t0) / 1000;
    sendTime.observe(seconds);
    const stype = shortType(typeUrl);
    const scope = con.kind === 'delta' ? deltaLog : log;
    if (result === 'ok') {
      const size = totalSize(resources);
      recordPush(typeUrl, seconds);
      configSizeBytes.observe({ type: typeUrl }, size);
      scope.info(`${stype}: ${what} for node:${con.proxy?.id ?? ''} resources:${resources.length} size:${size}B`);
      if (scope.debugEnabled()) scope.debug(`${stype}: ${con.conId} ${detail}`);
      return true;
    }
    if (result === 'timeout') {
      responseWriteTimeouts.inc();
      scope.info(`Timeout writing ${con.conId}: ${stype}`);
      this.o.close(con, status.DEADLINE_EXCEEDED, `timeout writing ${stype} response`);
    } else if (result === 'error') {
      recordSendError(typeUrl);
      scope.warn(`${stype}: Send failure for node:${con.proxy?.id ?? ''} resources:${resources.length}`);
    }
    return false;
  }
}
