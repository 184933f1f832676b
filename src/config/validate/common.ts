// Rules shared by several kinds: durations, string matchers, regexes, labels, selectors, exportTo,
// header names and values (Istio's pkg/config/validation helpers, same messages).
import { parseDurationNs } from '../../lib/duration';
import type { StringMatch, WorkloadSelector } from '../types';
import { isDNS1123Label, validateLabels } from './names';
import { re2SyntaxError } from '../../lib/re2';
import { dot, key, type Report } from './report';

const MS = 1_000_000n;

/** agent.ValidateDuration: at least 1ms, whole milliseconds. */
export function durationError(text: string): string | undefined {
  const ns = parseDurationNs(text);
  if (ns < MS) return 'duration must be greater than 1ms';
  if (ns % MS !== 0n) return 'only durations to ms precision are supported';
  return undefined;
}

export function checkDuration(text: string | undefined, path: string, r: Report): void {
  if (text !== undefined) r.error(path, durationError(text));
}

/** The single match type set on a StringMatch, if any. */
export function matchType(sm: StringMatch | undefined): 'exact' | 'prefix' | 'regex' | undefined {
  if (!sm) return undefined;
  if (sm.exact !== undefined) return 'exact';
  if (sm.prefix !== undefined) return 'prefix';
  if (sm.regex !== undefined) return 'regex';
  return undefined;
}

export function stringRegexpError(re: string, where: string): string | undefined {
  // Envoy bounds RE2 program size; Istio approximates it by length.
  if (re.length > 1024) return `"${where}": regex is too large, max length allowed is 1024`;
  const err = re2SyntaxError(re);
  if (err === undefined) return undefined;
  return `"${where}": ${err}; mesh uses RE2 style regex-based match (https://github.com/google/re2/wiki/Syntax)`;
}

/** validateStringMatchRegexp: only a regex match is checked (a non-empty RE2 pattern). */
export function stringMatchRegexpError(sm: StringMatch | undefined, where: string): string | undefined {
  if (matchType(sm) !== 'regex') return undefined;
  const re = sm!.regex!;
  if (re === '') return `"${where}": regex string match should not be empty`;
  return stringRegexpError(re, where);
}

/** validateStringMatch: a prefix must not be empty, a regex must compile. */
export function stringMatchError(sm: StringMatch | undefined, where: string): string | undefined {
  const t = matchType(sm);
  if (t === 'prefix' && sm!.prefix === '') return `"${where}": prefix string match should not be empty`;
  if (t === 'regex') return stringMatchRegexpError(sm, where);
  return undefined;
}

/** labels.Instance.Validate at `path` (one problem per key); `asWarning` reports without rejecting. */
export function checkLabels(labels: Readonly<Record<string, string>> | undefined, path: string, r: Report, asWarning = false): void {
  for (const e of validateLabels(labels)) (asWarning ? r.warn : r.error).call(r, key(path, e.key), e.message);
}

/** validateWorkloadSelector (type.v1beta1: matchLabels). */
export function checkWorkloadSelector(sel: WorkloadSelector | undefined, path: string, r: Report): void {
  if (!sel) return;
  const labels = sel.matchLabels ?? {};
  const p = dot(path, 'matchLabels');
  for (const [k, v] of Object.entries(labels)) {
    if (k === '') r.error(key(p, k), `empty key is not supported in selector: ${JSON.stringify(`${k}=${v}`)}`);
    if (k.includes('*') || v.includes('*')) r.error(key(p, k), `wildcard is not supported in selector: ${JSON.stringify(`${k}=${v}`)}`);
  }
  if (Object.keys(labels).length === 0) r.warn(p, 'workload selector specified without labels');
}

/**
 * ValidateAlphaWorkloadSelector (networking: labels), used by ServiceEntry and Sidecar; returns
 * whether the selector has no labels (which the callers turn into their own warning).
 */
export function checkAlphaWorkloadSelector(sel: WorkloadSelector | undefined, path: string, r: Report): { empty: boolean } {
  if (!sel) return { empty: false };
  const labels = sel.labels ?? {};
  const p = dot(path, 'labels');
  for (const [k, v] of Object.entries(labels)) {
    if (k === '') r.error(key(p, k), `empty key is not supported in selector: ${JSON.stringify(`${k}=${v}`)}`);
    if (k.includes('*') || v.includes('*')) r.error(key(p, k), `wildcard is not supported in selector: ${JSON.stringify(`${k}=${v}`)}`);
  }
  return { empty: Object.keys(labels).length === 0 };
}

function visibilityError(v: string): string | undefined {
  if (v === '.' || v === '*') return undefined;
  if (v === '~') return 'exportTo ~ (none) is not allowed for mesh configuration objects';
  if (!isDNS1123Label(v)) return 'only .,*,~, or a valid DNS 1123 label is allowed as exportTo entry';
  return undefined;
}

/** validateExportTo. */
export function checkExportTo(
  namespace: string,
  exportTo: readonly string[] | undefined,
  isServiceEntry: boolean,
  isDestinationRuleWithSelector: boolean,
  path: string,
  r: Report,
): void {
  if (!exportTo || exportTo.length === 0) return;
  const set = new Set<string>();
  exportTo.forEach((e, i) => {
    const p = `${path}[${i}]`;
    const k = e === '.' ? namespace : e;
    if (set.has(k)) {
      r.error(p, k !== e ? `duplicate entries in exportTo: . and current namespace ${namespace}` : `duplicate entries in exportTo for entry ${e}`);
      return;
    }
    if (isServiceEntry && e === '~') {
      set.add(k);
      return;
    }
    const err = visibilityError(k);
    if (err) r.error(p, err);
    else set.add(k);
  });
  if (isDestinationRuleWithSelector && set.size > 0) {
    if (set.has(namespace)) {
      if (set.size > 1) r.error(path, 'destination rule with workload selector cannot have multiple entries in exportTo');
    } else {
      r.error(path, 'destination rule with workload selector cannot have exportTo beyond current namespace');
    }
  }
  if (set.has('*') && exportTo.length > 1) r.error(path, 'cannot have both public (*) and non-public exportTo values for a resource');
  if (set.has('~') && exportTo.length > 1) r.error(path, 'cannot export service entry to no one (~) and someone');
}

// --- HTTP header names and values

const validHeaderRe = /^[-_A-Za-z0-9]+$/;

export function httpHeaderNameError(name: string): string | undefined {
  if (name === '') return 'header name cannot be empty';
  if (!validHeaderRe.test(name)) return `header name ${name} is not a valid header name`;
  return undefined;
}

export function corsHeaderNameError(name: string): string | undefined {
  if (name === '') return 'header name cannot be empty';
  if (name === '*') return undefined;
  if (!validHeaderRe.test(name)) return `header name ${name} is not a valid header name`;
  return undefined;
}

function isInternalHeader(k: string): boolean {
  return k.startsWith(':') || k.toLowerCase() === 'host';
}

export function isAuthorityHeader(k: string): boolean {
  const l = k.toLowerCase();
  return l === ':authority' || l === 'host';
}

/** Request set/add: `:`-prefixed names are internal, except the authority which is checked later. */
export function headerWithAuthorityOperationNameError(name: string): string | undefined {
  if (name === '') return 'header name cannot be empty';
  if (isInternalHeader(name) && !isAuthorityHeader(name)) return `invalid header ${JSON.stringify(name)}: header cannot have ":" prefix`;
  return undefined;
}

/** Request remove and all response operations. */
export function headerOperationNameError(name: string): string | undefined {
  if (name === '') return 'header name cannot be empty';
  if (name.toLowerCase() === 'host') return `invalid header ${JSON.stringify(name)}: cannot set Host header`;
  if (isInternalHeader(name)) return `invalid header ${JSON.stringify(name)}: header cannot have ":" prefix`;
  return undefined;
}

// Control characters other than tab (protoc-gen-validate's header value rule).
// eslint-disable-next-line no-control-regex
const headerValueRe = /^[^\u0000-\u0008\u000A-\u001F\u007F]*$/;

export function headerValueError(value: string): string | undefined {
  if (!headerValueRe.test(value)) return `header value configuration ${value} is invalid`;
  const e = envoyHeaderFormatError(value);
  return e ? `header value configuration: ${e}` : undefined;
}

const S = {
  Literal: 0,
  VariableName: 1,
  ExpectArray: 2,
  ExpectString: 3,
  String: 4,
  ExpectArrayDelimiterOrEnd: 5,
  ExpectArgsEnd: 6,
  ExpectVariableEnd: 7,
} as const;

/** Envoy's header value formatter syntax (`%VAR%`, `%VAR(args)%`, `%%`), ported from Istio. */
function envoyHeaderFormatError(v: string): string | undefined {
  if (v === '') return undefined;
  let state: number = S.Literal;
  for (let pos = 0; pos < v.length; pos++) {
    const ch = v[pos]!;
    const hasNext = pos + 1 < v.length;
    switch (state) {
      case S.Literal:
        if (ch !== '%') break;
        if (!hasNext) return 'invalid header configuration. Un-escaped %';
        if (v[pos + 1] === '%') {
          pos++;
          break;
        }
        state = S.VariableName;
        break;
      case S.VariableName:
        if (ch === '%') state = S.Literal;
        else if (ch === '(') state = S.ExpectArray;
        break;
      case S.ExpectArray:
        if (ch === '[') state = S.ExpectString;
        else if (ch !== ' ') state = S.String;
        break;
      case S.ExpectArrayDelimiterOrEnd:
        if (ch === ',') state = S.ExpectString;
        else if (ch === ']') state = S.ExpectArgsEnd;
        else if (ch !== ' ') return "invalid header configuration. Expecting ',', ']', or whitespace";
        break;
      case S.ExpectString:
        if (ch === '"') state = S.String;
        else if (ch !== ' ') return "invalid header configuration. Expecting '\"'";
        break;
      case S.String:
        if (ch === '\\') {
          if (!hasNext) return 'invalid header configuration. Un-terminated backslash in JSON string';
          pos++;
        } else if (ch === ')') state = S.ExpectVariableEnd;
        else if (ch === '"') state = S.ExpectArrayDelimiterOrEnd;
        break;
      case S.ExpectArgsEnd:
        if (ch === ')') state = S.ExpectVariableEnd;
        else if (ch !== ' ') return "invalid header configuration. Expecting ')' or whitespace after '{}', but found '{}'";
        break;
      case S.ExpectVariableEnd:
        if (ch === '%') state = S.Literal;
        else if (ch !== ' ') return "invalid header configuration. Expecting '%' or whitespace after";
        break;
    }
  }
  if (state !== S.Literal) return `invalid header configuration. Un-terminated variable expression '${v}'`;
  return undefined;
}

/** Go's `%v` of a string slice: `[a b]`, `[]` when empty. */
export function goStrings(v: readonly string[] | undefined): string {
  return `[${(v ?? []).join(' ')}]`;
}
