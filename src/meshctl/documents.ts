// Reading manifests the way istioctl does: a file is cut into documents at `---` lines (its
// kubeyaml reader), each document is parsed on its own, `kind: List` documents yield their items,
// and every object keeps the line it starts on and can say on which line one of its fields sits
// (Istio's field map, which knows scalar values only), for `<file>:<line>` in messages.
import { parseDocument, type Document as YamlDocument } from 'yaml';
import { isObject, typeName } from '../config/values';

import type { FieldPath } from '../analysis/model';

export type { FieldPath };

/** One object read from a file: a document, or an item of a List document. */
export interface SourceObject {
  value: Record<string, unknown>;
  /** The file as named on the command line (`-` for stdin). */
  source: string;
  /** Document position in the file: `[2]`, or `[2].items[0]` in a List. */
  document: string;
  /** 1-based line the object starts on. */
  line: number;
  /** Line of the scalar at `path` inside the object, when there is one. */
  lineOf(path: FieldPath): number | undefined;
}

/** A document that could not be read as an object. */
export interface DocumentError {
  source: string;
  document: string;
  line: number;
  message: string;
}

export interface ReadResult {
  objects: SourceObject[];
  errors: DocumentError[];
}

interface Chunk {
  text: string;
  /** Line (1-based) of the chunk's first line of text. */
  firstLine: number;
  /** istioctl's start line: the first line that is neither empty nor `---`. */
  startLine: number;
}

/** Cuts `text` into documents at lines that are `---` followed only by spaces (kubeyaml's YAMLReader). */
export function splitDocuments(text: string): Chunk[] {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const out: Chunk[] = [];
  let buf: string[] = [];
  let first = 1;
  let start = 0;
  const flush = (): void => {
    if (buf.length > 0 && buf.join('\n').trim() !== '') out.push({ text: buf.join('\n') + '\n', firstLine: first, startLine: start || first });
    buf = [];
    start = 0;
  };
  lines.forEach((line, i) => {
    const n = i + 1;
    if (/^---\s*$/.test(line)) {
      if (buf.some((l) => l.trim() !== '')) flush();
      buf = [];
      start = 0;
      first = n + 1;
      return;
    }
    if (buf.length === 0) first = n;
    if (start === 0 && line !== '') start = n;
    buf.push(line);
  });
  flush();
  return out;
}

function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) starts.push(i + 1);
  return starts;
}

function lineAt(starts: readonly number[], offset: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (starts[mid]! <= offset) lo = mid;
    else hi = mid - 1;
  }
  return lo + 1;
}

/** Go's yaml error for a repeated key, which istioctl users grep for (`key "x" already set in map`). */
function yamlError(doc: YamlDocument, chunk: Chunk): { line: number; message: string } {
  const e = doc.errors[0]!;
  const line = (e.linePos?.[0].line ?? 1) + chunk.firstLine - 1;
  if (e.code === 'DUPLICATE_KEY') {
    const rest = chunk.text.split('\n')[(e.linePos?.[0].line ?? 1) - 1] ?? '';
    const key = /^\s*(?:-\s+)?("[^"]*"|'[^']*'|[^:#]+?)\s*:/.exec(rest)?.[1]?.replace(/^["']|["']$/g, '') ?? '';
    return { line, message: `error converting YAML to JSON: yaml: unmarshal errors:\n  line ${line}: key ${JSON.stringify(key)} already set in map` };
  }
  const first = e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
  return { line, message: `error converting YAML to JSON: yaml: line ${line}: ${first}` };
}

const noLine = (): undefined => undefined;

/**
 * A `.json` file holding one JSON value (an object, a List, or an array of objects) is read with
 * JSON.parse: an order of magnitude faster than YAML on large inputs. istioctl keeps no line numbers
 * for JSON files, so neither do these objects. Anything else goes through the YAML reader.
 */
function readJson(text: string, source: string): ReadResult | undefined {
  if (!/\.json$/i.test(source)) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  const out: ReadResult = { objects: [], errors: [] };
  const push = (x: unknown, document: string): void => {
    if (x === null) return;
    if (isObject(x)) out.objects.push({ value: x, source, document, line: 1, lineOf: noLine });
    else out.errors.push({ source, document, line: 1, message: `a document must be an object with apiVersion and kind, got ${typeName(x)}` });
  };
  if (Array.isArray(v)) v.forEach((x, i) => push(x, `[0][${i}]`));
  else if (isObject(v) && isList(v)) (v.items as unknown[]).forEach((x, j) => push(x, `[0].items[${j}]`));
  else push(v, '[0]');
  return out;
}

/** Reads every object of a manifest; `source` names the file in messages. */
export function readObjects(text: string, source: string): ReadResult {
  const json = readJson(text, source);
  if (json) return json;
  const out: ReadResult = { objects: [], errors: [] };
  splitDocuments(text).forEach((chunk, index) => {
    const document = `[${index}]`;
    const doc = parseDocument(chunk.text, { merge: true, uniqueKeys: true, prettyErrors: true });
    if (doc.errors.length > 0) {
      out.errors.push({ source, document, line: chunk.startLine, message: yamlError(doc, chunk).message });
      return;
    }
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 1000 });
    } catch (e) {
      out.errors.push({ source, document, line: chunk.startLine, message: `error converting YAML to JSON: ${(e as Error).message}` });
      return;
    }
    if (value === null || value === undefined) return;
    let starts: number[] | undefined;
    const lineOf =
      (prefix: FieldPath) =>
      (path: FieldPath): number | undefined => {
        const node = doc.getIn([...prefix, ...path], true) as { range?: [number, number, number] } | undefined;
        if (
          !node ||
          !node.range ||
          !('value' in node) ||
          isObject((node as { value: unknown }).value) ||
          Array.isArray((node as { value: unknown }).value)
        )
          return undefined;
        starts ??= lineStarts(chunk.text);
        return lineAt(starts, node.range[0]) + chunk.firstLine - 1;
      };
    if (!isObject(value)) {
      out.errors.push({
        source,
        document,
        line: chunk.startLine,
        message: `a document must be an object with apiVersion and kind, got ${typeName(value)}`,
      });
      return;
    }
    if (isList(value)) {
      (value.items as unknown[]).forEach((item, j) => {
        if (!isObject(item)) {
          out.errors.push({
            source,
            document: `${document}.items[${j}]`,
            line: chunk.startLine,
            message: `a List item must be an object, got ${typeName(item)}`,
          });
          return;
        }
        const node = doc.getIn(['items', j], true) as { range?: [number, number, number] } | undefined;
        starts ??= lineStarts(chunk.text);
        const line = node?.range ? lineAt(starts, node.range[0]) + chunk.firstLine - 1 : chunk.startLine;
        out.objects.push({ value: item, source, document: `${document}.items[${j}]`, line, lineOf: lineOf(['items', j]) });
      });
      return;
    }
    out.objects.push({ value, source, document, line: chunk.startLine, lineOf: lineOf([]) });
  });
  return out;
}

/** `kind: List` (and the typed `…List` kinds) with an items array. */
export function isList(v: Record<string, unknown>): boolean {
  return typeof v.kind === 'string' && (v.kind === 'List' || v.kind.endsWith('List')) && Array.isArray(v.items);
}
