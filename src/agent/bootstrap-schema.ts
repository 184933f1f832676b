// Checks a bootstrap against Envoy's Bootstrap schema (every type Envoy's registry knows). Kept apart from
// bootstrap.ts because loading the registry costs the agent ~0.3 s of start-up and much of its memory: the
// built-in bootstrap is checked by the tests, so only a user's --templateFile is checked at run time.
import { fromJson, type JsonValue } from '@bufbuild/protobuf';
import { BootstrapSchema, type Bootstrap } from '../gen/envoy/config/bootstrap/v3/bootstrap_pb';
import { envoyTypeRegistry } from '../lib/xds/registry';
import { BootstrapError } from './bootstrap';

/** Parses the bootstrap with the generated Bootstrap schema: what Envoy would refuse fails here. */
export function validateBootstrap(json: JsonValue, source: string): Bootstrap {
  try {
    return fromJson(BootstrapSchema, json, { registry: envoyTypeRegistry() });
  } catch (e) {
    throw new BootstrapError(`${source}: invalid envoy.config.bootstrap.v3.Bootstrap: ${(e as Error).message}`);
  }
}
