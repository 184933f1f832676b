// Public API of the data-plane engine: start it from a bootstrap, load bootstraps like Envoy does, and
// plug HTTP filters in (jwt_authn registers its factory in defaultFilterRegistry() before startEngine).
export { startEngine, type Engine, type EngineOptions, type ServerState } from './engine';
export { callCluster } from './engine/call-cluster';
export { ENVOY_API_VERSION } from './engine/node';
export { loadBootstrap, parseBootstrap, validateBootstrap, BootstrapError, type BootstrapInput, type LoadedBootstrap } from './bootstrap';
export { proxyTypeRegistry } from './registry';
export { defaultFilterRegistry, routerFilterFactory, grpcStatsFilterFactory } from './http/filters/index';
export {
  HttpFilterRegistry,
  typeNameOf,
  type FilterFactoryContext,
  type FilterResult,
  type HttpFilter,
  type HttpFilterFactory,
  type HttpStream,
  type LocalReply,
} from './http/filter-api';
export type { ClusterCall, UpstreamCall, UpstreamCallResult } from './common/cluster-call';
export { RequestHeaders, ResponseHeaders, HeaderMap } from './codec/headers';
export {
  compileStringMatcher,
  compileValueMatcher,
  compileMetadataMatcher,
  compileListStringMatcher,
  metadataValue,
  type DynamicMetadata,
  type StringMatch,
  type ValueMatch,
  type MetadataMatch,
} from './matchers/string';
export { ConfigError } from './common/config-error';
export { compileHeaderMatcher } from './route/match';
export { compileRouteConfiguration, selectRoute } from './route/compile';
export type { CompiledRouteConfig, RouteSelection, RouteRequest } from './route/types';
export { RbacEngine, type RbacInput, type RbacDecision } from './rbac/engine';
export { StreamInfo, type DownstreamConnectionInfo } from './stream-info';
export { LoggerRegistry, parseLogLevel, type LogLevel } from './log';
