// Reading YAML the way Go programs built on gopkg.in/yaml.v2 and sigs.k8s.io/yaml do: YAML 1.1 scalars (yes/no/on/
// off are booleans, 0777 is octal, 1_000 an int), timestamps and sexagesimal numbers left as strings, keys made
// strings, the result shaped like JSON. And the document splitting of Kubernetes' YAMLReader (`---` lines).
import { parse, parseAllDocuments, YAMLParseError, type Tags } from 'yaml';

export class GoYamlParseError extends Error {}

const DROPPED = new Set([
  'tag:yaml.org,2002:timestamp',
  'tag:yaml.org,2002:binary',
  'tag:yaml.org,2002:omap',
  'tag:yaml.org,2002:pairs',
  'tag:yaml.org,2002:set',
]);

function customTags(tags: Tags): Tags {
  return tags
    .filter((t) => typeof t !== 'object' || (!DROPPED.has(t.tag) && (t as { format?: string }).format !== 'TIME'))
    .map((t) => (typeof t === 'object' && t.tag === 'tag:yaml.org,2002:float' && t.test ? { ...t, test: numberStart(t.test) } : t));
}

/**
 * yaml.v2 reads a plain scalar as a number only when it starts with a digit, a sign or a dot: `e1` and `E5` are
 * strings (the YAML 1.1 exponent pattern of the yaml package would make them floats).
 */
function numberStart(test: RegExp): RegExp {
  return new RegExp(`^(?=[-+.0-9])(?:${test.source.replace(/^\^/, '').replace(/\$$/, '')})$`, test.flags);
}

function toJsonShape(v: unknown): unknown {
  if (v instanceof Map) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of v) out[keyString(k)] = toJsonShape(x);
    return out;
  }
  if (Array.isArray(v)) return v.map(toJsonShape);
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = toJsonShape(x);
    return out;
  }
  return v;
}

function keyString(k: unknown): string {
  if (typeof k === 'string') return k;
  if (k === null) return 'null';
  return String(k);
}

function message(e: YAMLParseError): string {
  const line = e.linePos?.[0]?.line;
  const text = e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
  return line ? `yaml: line ${line}: ${text}` : `yaml: ${text}`;
}

/** One YAML document as yaml.v2 + sigs.k8s.io/yaml would decode it into interface{}. */
export function parseGoYaml(text: string): unknown {
  try {
    return toJsonShape(parse(text, { version: '1.1', customTags, uniqueKeys: false, mapAsMap: true, maxAliasCount: 10000, merge: true }));
  } catch (e) {
    if (e instanceof YAMLParseError) throw new GoYamlParseError(message(e));
    throw e;
  }
}

/** Every document of a multi-document text (empty documents dropped). */
export function parseGoYamlAll(text: string): unknown[] {
  const docs = parseAllDocuments(text, { version: '1.1', customTags, uniqueKeys: false, merge: true });
  const list = Array.isArray(docs) ? docs : [docs];
  const out: unknown[] = [];
  for (const d of list) {
    if (d.errors.length) throw new GoYamlParseError(message(d.errors[0]!));
    const v = toJsonShape(d.toJS({ mapAsMap: true, maxAliasCount: 10000 }));
    if (v !== null && v !== undefined) out.push(v);
  }
  return out;
}

/**
 * Kubernetes' YAMLReader: splits on lines starting with `---` (only spaces or a comment may follow), returning
 * each non-empty document's raw text including its line ends.
 */
export function splitYamlDocuments(text: string): string[] {
  const docs: string[] = [];
  let buf = '';
  const lines = text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
  for (const line of lines) {
    if (line.startsWith('---')) {
      const rest = line.slice(3).trim();
      if (rest.length > 0 && rest[0] !== '#') throw new GoYamlParseError(`invalid Yaml document separator: ${line.replace(/\n$/, '')}`);
      if (buf.length) docs.push(buf);
      buf = '';
      continue;
    }
    buf += line;
  }
  if (buf.length) docs.push(buf);
  return docs;
}
