// istioctl's formatting of analysis messages: `log` lines (optionally coloured), and `json`/`yaml`
// documents with the fields of diag.Message.Unstructured (keys sorted, as Go's encoders write maps).
import { stringify } from 'yaml';
import { DOCS } from '../text';
import type { Message } from '../../analysis/model';
import { messageText, originText, reference } from '../../analysis/run';
import { fullName } from '../../analysis/model';

export type OutputFormat = 'log' | 'json' | 'yaml';

const COLORS: Readonly<Record<string, string>> = { Info: '', Warning: '\x1b[33m', Error: '\x1b[1;31m' };

/** formatting.render: `Level [CODE] (Kind ns/name file:line) text`. */
export function renderLog(m: Message, colorize: boolean): string {
  const pre = colorize ? (COLORS[m.type.level] ?? '') : '';
  const post = colorize ? '\x1b[0m' : '';
  return `${pre}${m.type.level}${post} [${m.type.code}]${originText(m)} ${messageText(m)}`;
}

/** diag.Message.Unstructured(true), keys in Go's sorted map order. */
export function unstructured(m: Message): Record<string, string> {
  const out: Record<string, string> = {
    code: m.type.code,
    documentationUrl: `${DOCS.configAnalysis}/${m.type.code.toLowerCase()}/?ref=meshctl-analyze`,
    level: m.type.level,
    message: messageText(m),
  };
  if (m.resource) {
    out.origin = `${m.resource.kind} ${fullName(m.resource)}`;
    const ref = reference(m);
    if (ref !== undefined) out.reference = ref;
  }
  return out;
}

/** Go's json.Marshal escapes HTML-significant characters. */
function goJson(v: unknown): string {
  return JSON.stringify(v, null, '\t').replace(/[<>&]/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`);
}

/** formatting.Print (without the trailing newline its caller adds). */
export function printMessages(ms: readonly Message[], format: OutputFormat, colorize: boolean): string {
  switch (format) {
    case 'log':
      return ms.map((m) => renderLog(m, colorize)).join('\n');
    case 'json':
      return goJson(ms.map(unstructured));
    case 'yaml':
      return ms.length === 0 ? '[]\n' : stringify(ms.map(unstructured), { sortMapEntries: true, lineWidth: 0 });
  }
}
