// The configuration model: types, parsing, validation, stores and the --configDir source.
export * from './types';
export type { ConfigEvent, ConfigStore } from './store';
export { type ConfigError, type FieldError, formatConfigError } from './errors';
export {
  ALL_KINDS,
  apiVersionOf,
  type GroupVersion,
  isClusterScoped,
  isKind,
  kindOf,
  kindOfPlural,
  type KindSchema,
  MESH_KINDS,
  GATEWAY_API_KINDS,
  objectKindOf,
  pluralOf,
  preferredApiVersion,
  SCHEMAS,
} from './schemas';
export { convertObject, type ConvertResult, DEFAULT_NAMESPACE, type Origin, parseDocuments, type ParseResult } from './parse';
export { validateConfig, toRoutingClaim, type RoutingClaim, HEADER_JWT_CLAIM, re2SyntaxError, hostMatches, hostSubsetOf } from './validate';
export { type ConfigRef, MemoryConfigStore, type MemoryConfigStoreOptions, sameContent } from './memory';
export { AggregateConfigStore } from './aggregate';
export { recordRejectedConfig, totalRejectedConfigs } from './metrics';
export { DEFAULT_FILE_DEBOUNCE_MS, FileConfigStore, type FileConfigStoreOptions, loadConfigDir, type DirLoad } from './file';
