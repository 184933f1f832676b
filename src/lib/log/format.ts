// Line encoders with the layouts Istio gets from zap:
//   text: time \t level \t [scope \t] [caller \t] message [\t k=v k=v] \n [stack \n]
//   JSON: {"level","time","scope","caller","msg", ...fields, "stack"} \n
// Istio folds a scope's labels into the message in text mode (`msg\tk=v k2=v2`) and emits them as JSON
// fields in JSON mode; per-call fields are treated the same way.

import { formatTimestamp } from './clock';
import { type Level, levelName } from './levels';

export type Field = readonly [key: string, value: unknown];

export interface LogEntry {
  level: Level;
  /** Epoch microseconds. */
  time: number;
  /** Scope name to emit; empty for the default scope. */
  scope: string;
  caller?: string | undefined;
  msg: string;
  fields: readonly Field[];
  stack?: string | undefined;
}

export type Encoder = (e: LogEntry) => string;

/** Renders a value for text output, close to Go's fmt.Sprint. */
export function textValue(v: unknown): string {
  switch (typeof v) {
    case 'string':
      return v;
    case 'number':
    case 'bigint':
    case 'boolean':
      return String(v);
    case 'undefined':
      return '<nil>';
    case 'symbol':
      return v.toString();
    case 'function':
      return `func ${v.name || '<anonymous>'}`;
    default:
      break;
  }
  if (v === null) return '<nil>';
  if (v instanceof Error) return v.message;
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v)) return `[${v.map(textValue).join(' ')}]`;
  if (v instanceof Map) return `map[${[...v].map(([k, x]) => `${textValue(k)}:${textValue(x)}`).join(' ')}]`;
  if (v instanceof Set) return `[${[...v].map(textValue).join(' ')}]`;
  const s = safeStringify(v);
  return s ?? String(v);
}

function safeStringify(v: unknown): string | undefined {
  try {
    return JSON.stringify(v, jsonReplacer);
  } catch {
    return undefined;
  }
}

function jsonReplacer(_key: string, v: unknown): unknown {
  if (typeof v === 'bigint') return v.toString();
  if (v instanceof Error) return v.message;
  if (v instanceof Map) return Object.fromEntries(v);
  if (v instanceof Set) return [...v];
  return v;
}

/** Renders a value as a JSON value; never throws. */
export function jsonValue(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (v instanceof Error) return JSON.stringify(v.message);
  const s = safeStringify(v);
  if (s === undefined) return v === undefined || typeof v === 'function' || typeof v === 'symbol' ? 'null' : JSON.stringify(String(v));
  return s;
}

/** The message with fields folded in as Istio does for labels: `msg\tk=v k2=v2`. */
export function messageWithFields(msg: string, fields: readonly Field[]): string {
  if (fields.length === 0) return msg;
  let s = msg + '\t';
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i] as Field;
    if (i > 0) s += ' ';
    s += f[0] + '=' + textValue(f[1]);
  }
  return s;
}

export const encodeText: Encoder = (e) => {
  let line = formatTimestamp(e.time) + '\t' + levelName(e.level) + '\t';
  if (e.scope) line += e.scope + '\t';
  if (e.caller) line += e.caller + '\t';
  line += messageWithFields(e.msg, e.fields);
  if (e.stack) line += '\n' + e.stack;
  return line + '\n';
};

export const encodeJson: Encoder = (e) => {
  let line = '{"level":"' + levelName(e.level) + '","time":"' + formatTimestamp(e.time) + '"';
  if (e.scope) line += ',"scope":' + JSON.stringify(e.scope);
  if (e.caller) line += ',"caller":' + JSON.stringify(e.caller);
  line += ',"msg":' + JSON.stringify(e.msg);
  for (const [k, v] of e.fields) line += ',' + JSON.stringify(k) + ':' + jsonValue(v);
  if (e.stack) line += ',"stack":' + JSON.stringify(e.stack);
  return line + '}\n';
};
