// Orchestrator objects as Go templates see them: struct fields by their Go names (`.Spec.Containers`,
// `$c.Ports`, `.ObjectMeta.Annotations`), zero values where JSON has nothing, typed string maps whose
// missing keys index to "". Views remember the JSON they came from, so functions like structToJSON can
// encode them back exactly.
import { GoMap, GoStruct } from '../lib/gotemplate';
import { structFields, type Json } from './typed';

export const VIEW_JSON = Symbol('view.json');

export class StructView extends GoStruct {
  readonly [VIEW_JSON]: Json;
  constructor(
    private readonly typeName: string,
    json: Json,
  ) {
    super();
    this[VIEW_JSON] = json;
  }
  goType(): string {
    return this.typeName.replace(/^core\./, 'v1.').replace(/^meta\./, 'v1.');
  }
}

function zeroOf(type: string): unknown {
  if (type.startsWith('*') || type.startsWith('[]') || type === 'raw' || type === 'bytes') return null;
  if (type.startsWith('map:')) return new GoMap(null, zeroOf(type.slice(4)), 'map[string]string');
  switch (type) {
    case 'string':
    case 'quantity':
      return '';
    case 'int':
      return 0n;
    case 'float':
      return 0;
    case 'bool':
      return false;
    case 'intstr':
      return 0n;
    case 'time':
      return null;
  }
  return goView({}, type);
}

function valueView(v: Json | undefined, type: string): unknown {
  if (v === undefined || v === null) return zeroOf(type);
  if (type.startsWith('*')) return valueView(v, type.slice(1));
  if (type.startsWith('[]')) return Array.isArray(v) ? v.map((x) => valueView(x, type.slice(2))) : null;
  if (type.startsWith('map:')) {
    const elem = type.slice(4);
    return new GoMap(
      Object.entries(v as Record<string, Json>).map(([k, x]) => [k, valueView(x, elem)] as const),
      zeroOf(elem),
      'map[string]string',
    );
  }
  switch (type) {
    case 'int':
      return typeof v === 'number' ? BigInt(v) : v;
    case 'intstr':
      return typeof v === 'number' ? BigInt(v) : v;
    case 'string':
    case 'float':
    case 'bool':
    case 'quantity':
    case 'time':
    case 'raw':
    case 'bytes':
      return v;
  }
  return goView(v, type);
}

/** A Go view of normalized JSON `json` of struct `structName`. */
export function goView(json: Json, structName: string): StructView {
  const view = new StructView(structName, json);
  const obj = (json ?? {}) as Record<string, Json>;
  const assign = (name: string) => {
    for (const f of structFields(name)) {
      if (f.inline) {
        // Embedded structs are reachable both by their type name and through promoted fields.
        assign(f.type);
        (view as unknown as Record<string, unknown>)[f.goName] = goView(json, f.type);
        continue;
      }
      (view as unknown as Record<string, unknown>)[f.goName] = valueView(obj[f.json], f.type);
    }
  };
  assign(structName);
  return view;
}

/** The JSON a view was built from (structToJSON of a view). */
export function viewJson(v: unknown): Json | undefined {
  return v instanceof StructView ? v[VIEW_JSON] : undefined;
}
