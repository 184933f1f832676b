// request_headers_to_add / _to_remove and response_headers_to_add / _to_remove of routes, virtual
// hosts, route configurations and weighted clusters: compiled once, applied per request.
import type { HeaderValueOption } from '../../gen/envoy/config/core/v3/base_pb';
import { HeaderValueOption_HeaderAppendAction as Append } from '../../gen/envoy/config/core/v3/base_pb';
import { compileFormat, formatHeader, type FormatContext } from '../format/substitution';
import type { HeaderMap } from '../codec/headers';
import { ConfigError } from '../common/config-error';

type Pieces = ReturnType<typeof compileFormat>;

interface AddOp {
  key: string;
  /** Literal value, or pieces with substitutions. */
  literal: string | undefined;
  pieces: Pieces | undefined;
  action: Append;
  keepEmpty: boolean;
}

export interface HeaderOps {
  requestAdd: readonly AddOp[];
  requestRemove: readonly string[];
  responseAdd: readonly AddOp[];
  responseRemove: readonly string[];
}

function compileAdds(opts: readonly HeaderValueOption[], where: string, request: boolean): AddOp[] {
  return opts.map((o, i) => {
    const w = `${where}[${i}]`;
    const key = (o.header?.key ?? '').toLowerCase();
    if (!key) throw new ConfigError(`${w}.header.key: must not be empty`);
    if (request && (key.startsWith(':') || key === 'host')) throw new ConfigError(`${w}: ':-prefixed' or host headers may not be modified`);
    if (!request && key.startsWith(':')) throw new ConfigError(`${w}: ':-prefixed' headers may not be modified`);
    const value =
      o.header?.value !== undefined && o.header.value !== ''
        ? o.header.value
        : Buffer.from(o.header?.rawValue ?? new Uint8Array()).toString('latin1');
    // the deprecated `append` BoolValue wins when set, as in Envoy
    const action = o.append === undefined ? o.appendAction : o.append ? Append.APPEND_IF_EXISTS_OR_ADD : Append.OVERWRITE_IF_EXISTS_OR_ADD;
    const literal = value.includes('%') ? undefined : value;
    return {
      key,
      literal,
      pieces: literal === undefined ? compileFormat(value, `${w}.header.value`) : undefined,
      action,
      keepEmpty: o.keepEmptyValue,
    };
  });
}

function compileRemoves(names: readonly string[], where: string, request: boolean): string[] {
  return names.map((n, i) => {
    const k = n.toLowerCase();
    if (k.startsWith(':') || (request && k === 'host')) throw new ConfigError(`${where}[${i}]: ':-prefixed' or host headers may not be removed`);
    return k;
  });
}

export interface HeaderOpsSource {
  requestHeadersToAdd: readonly HeaderValueOption[];
  requestHeadersToRemove: readonly string[];
  responseHeadersToAdd: readonly HeaderValueOption[];
  responseHeadersToRemove: readonly string[];
}

/** undefined when the source has no header operations (the common case). */
export function compileHeaderOps(s: HeaderOpsSource, where: string): HeaderOps | undefined {
  if (s.requestHeadersToAdd.length + s.requestHeadersToRemove.length + s.responseHeadersToAdd.length + s.responseHeadersToRemove.length === 0)
    return undefined;
  return {
    requestAdd: compileAdds(s.requestHeadersToAdd, `${where}.request_headers_to_add`, true),
    requestRemove: compileRemoves(s.requestHeadersToRemove, `${where}.request_headers_to_remove`, true),
    responseAdd: compileAdds(s.responseHeadersToAdd, `${where}.response_headers_to_add`, false),
    responseRemove: compileRemoves(s.responseHeadersToRemove, `${where}.response_headers_to_remove`, false),
  };
}

function applyAdds(ops: readonly AddOp[], h: HeaderMap, ctx: FormatContext): void {
  for (const op of ops) {
    const value = op.literal ?? formatHeader(op.pieces!, ctx);
    if (value === '' && !op.keepEmpty) continue;
    const exists = h.has(op.key);
    switch (op.action) {
      case Append.APPEND_IF_EXISTS_OR_ADD:
        h.add(op.key, value);
        break;
      case Append.ADD_IF_ABSENT:
        if (!exists) h.set(op.key, value);
        break;
      case Append.OVERWRITE_IF_EXISTS_OR_ADD:
        h.set(op.key, value);
        break;
      case Append.OVERWRITE_IF_EXISTS:
        if (exists) h.set(op.key, value);
        break;
    }
  }
}

/** Envoy removes first, then adds (HeaderParser::evaluateHeaders). */
export function applyRequestOps(ops: HeaderOps | undefined, h: HeaderMap, ctx: FormatContext): void {
  if (!ops) return;
  for (const k of ops.requestRemove) h.remove(k);
  applyAdds(ops.requestAdd, h, ctx);
}

export function applyResponseOps(ops: HeaderOps | undefined, h: HeaderMap, ctx: FormatContext): void {
  if (!ops) return;
  for (const k of ops.responseRemove) h.remove(k);
  applyAdds(ops.responseAdd, h, ctx);
}
