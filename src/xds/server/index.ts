// Public API of the ADS server.
export {
  AdsServer,
  type AdsServerOptions,
  type AdsServerStats,
  type AttachOptions,
  type ConnectionHooks,
  type HookedConnection,
  type GeneratorTable,
  type PushAllOptions,
} from './server';
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
  authenticateXdsPeer,
  authorizeXdsProxy,
  checkXdsAccess,
  parseSpiffeIdentity,
  type SpiffeIdentity,
  type XdsAuthDenied,
  type XdsAuthenticated,
  type XdsAuthorized,
  type XdsAuthSettings,
  type XdsClaim,
} from './auth';
export { mergePushRequests, newPushRequest, PROXY_REQUEST_TRIGGER, UNKNOWN_TRIGGER, type PushRequestInit } from './push-request';
export { clusterHostname, isWildcardType, metricType, orderTypes, PUSH_ORDER, shortType } from '../../lib/xds/type-urls';
