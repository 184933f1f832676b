// udpa.type.v1.TypedStruct / xds.type.v3.TypedStruct carry an extension config as JSON with its type
// URL; Envoy treats them as the wrapped type. Unwrapped to a packed Any of that type.
import { fromJson, type Registry } from '@bufbuild/protobuf';
import { anyPack, anyUnpack, type Any } from '@bufbuild/protobuf/wkt';
import { TypedStructSchema } from '../../gen/udpa/type/v1/typed_struct_pb';
import { ConfigError } from '../common/config-error';

const TYPED_STRUCT = new Set(['type.googleapis.com/udpa.type.v1.TypedStruct', 'type.googleapis.com/xds.type.v3.TypedStruct']);

export function unwrapTypedStruct(any: Any, types: Registry, where: string): Any {
  if (!TYPED_STRUCT.has(any.typeUrl)) return any;
  // xds.type.v3.TypedStruct has the same fields and numbers as udpa's
  const ts = anyUnpack({ ...any, typeUrl: 'type.googleapis.com/udpa.type.v1.TypedStruct' } as Any, TypedStructSchema);
  if (!ts) throw new ConfigError(`${where}: cannot decode TypedStruct`);
  const name = ts.typeUrl.slice(ts.typeUrl.lastIndexOf('/') + 1);
  const schema = types.getMessage(name);
  if (!schema) throw new ConfigError(`${where}: TypedStruct type '${ts.typeUrl}' is not known to this proxy`);
  try {
    return anyPack(schema, fromJson(schema, ts.value ?? {}, { registry: types }));
  } catch (e) {
    throw new ConfigError(`${where}: TypedStruct of '${name}': ${(e as Error).message}`);
  }
}
