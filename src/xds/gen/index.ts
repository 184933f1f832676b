// Public surface of the xDS generators.
export * from './common';
export * from './clusters';
export * from './endpoints';
export * from './filters';
export * from './generators';
export * from './lds';
export * from './rds';
export * from './route';
export * from './tls';
