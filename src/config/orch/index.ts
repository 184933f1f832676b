// The orchestrator (`--registries Orchestrator`) configuration source.
export {
  createOrchClient,
  DEFAULT_ORCH_API_BURST,
  DEFAULT_ORCH_API_QPS,
  loadClientNode,
  OrchApiError,
  type OrchClient,
  type OrchClientOptions,
  type OrchMethod,
  type OrchRequestOptions,
  OrchConfigError,
} from './client';
export { type BackoffOptions, DEFAULT_BACKOFF } from './informer';
export { DEFAULT_BURST, DEFAULT_QPS, limiterFor, type RateLimiter, TokenBucket } from './ratelimit';
export { localityString, type NodeLocality } from './resources';
export { OrchConfigStore, type OrchConfigStoreOptions, startOrchConfigStore } from './source';
