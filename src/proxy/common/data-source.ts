// envoy.config.core.v3.DataSource read once at config time (Envoy's Config::DataSource::read): inline bytes or
// string, a file, or an environment variable; a source that cannot be read rejects the resource.
import { readFileSync } from 'node:fs';
import type { DataSource } from '../../gen/envoy/config/core/v3/base_pb';
import { ConfigError } from './config-error';

export function readDataSource(d: DataSource | undefined, where: string): Buffer | undefined {
  if (!d) return undefined;
  const s = d.specifier;
  switch (s.case) {
    case 'inlineString':
      return Buffer.from(s.value);
    case 'inlineBytes':
      return Buffer.from(s.value);
    case 'filename':
      try {
        return readFileSync(s.value);
      } catch (e) {
        throw new ConfigError(`${where}.filename: cannot read '${s.value}': ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      }
    case 'environmentVariable': {
      const v = process.env[s.value];
      if (v === undefined) throw new ConfigError(`${where}.environment_variable: environment variable '${s.value}' does not exist`);
      return Buffer.from(v);
    }
    default:
      return undefined;
  }
}
