// typed_per_filter_config decoding for route compilation: each entry is handed to the factory that
// owns its type (unwrapping envoy.config.route.v3.FilterConfig and TypedStruct); an entry no factory
// owns rejects the route configuration, unless the FilterConfig wrapper marks it optional.
import { anyUnpack, type Any } from '@bufbuild/protobuf/wkt';
import type { Registry } from '@bufbuild/protobuf';
import { FilterConfigSchema } from '../../gen/envoy/config/route/v3/route_components_pb';
import { ConfigError } from '../common/config-error';
import type { PerFilterParser } from '../route/action';
import type { PerFilterConfig } from '../route/types';
import { typeNameOf, type HttpFilterRegistry } from './filter-api';
import { unwrapTypedStruct } from './typed-struct';

const EMPTY: ReadonlyMap<string, PerFilterConfig> = new Map();

export function perFilterParser(filters: HttpFilterRegistry, types: Registry): PerFilterParser {
  return (map, where) => {
    const keys = Object.keys(map);
    if (keys.length === 0) return EMPTY;
    const out = new Map<string, PerFilterConfig>();
    for (const name of keys) {
      const w = `${where}.${name}`;
      let any: Any | undefined = map[name]!;
      let optional = false;
      let disabled = false;
      if (typeNameOf(any) === 'envoy.config.route.v3.FilterConfig') {
        const fc = anyUnpack(any, FilterConfigSchema);
        if (!fc) throw new ConfigError(`${w}: cannot decode envoy.config.route.v3.FilterConfig`);
        any = fc.config;
        optional = fc.isOptional;
        disabled = fc.disabled;
        if (!any) {
          out.set(name, { config: undefined, disabled });
          continue;
        }
      }
      any = unwrapTypedStruct(any, types, w);
      const f = filters.forPerRouteType(typeNameOf(any));
      if (!f?.parsePerRoute) {
        if (optional) continue;
        throw new ConfigError(`${w}: Didn't find a registered implementation for name: '${name}'`);
      }
      out.set(name, { config: f.parsePerRoute(any, w, types), disabled });
    }
    return out;
  };
}
