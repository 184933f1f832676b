// Public API of the ADS server.
export { AdsServer } from './server';
export type {
  AdsServerOptions,
  AdsServerStats,
  AttachOptions,
  ConnectionHooks,
  HookedConnection,
  GeneratorTable,
  PushAllOptions,
  RequestCaller,
} from './options';
export type { ConnectionInfo, ListenerKind, StreamKind } from './connection';
export type { NackRecord, WatchInfo } from './watch';
export {
  adsSettingsFromEnv,
  DEFAULT_ADS_SETTINGS,
  DEFAULT_GRPC_SERVER_LIMITS,
  grpcServerLimitsFrom,
  grpcServerOptions,
  resolvePushThrottle,
  xdsCacheSettingsFromEnv,
  type AdsSettings,
  type GrpcServerLimits,
} from './settings';
export {
  authorizeXdsProxy,
  type XdsAuthDenied,
  type XdsAuthenticate,
  type XdsAuthenticated,
  type XdsAuthorized,
  type XdsAuthSettings,
  type XdsClaim,
  type XdsStreamCall,
} from './auth';
export { mergePushRequests, newPushRequest, PROXY_REQUEST_TRIGGER, UNKNOWN_TRIGGER, type PushRequestInit } from './push-request';
export { clusterHostname, isWildcardType, metricType, orderTypes, PUSH_ORDER, shortType } from '../../lib/xds/type-urls';
