// The bug-report --filename file (istioctl's BugReportConfig in YAML), and how it overlays the flags:
// the file's values win over flags, lists replace (JSON merge semantics).
import { DurationError, parseDurationMs } from '../../lib/duration';
import { GoYamlParseError, parseGoYaml } from '../../lib/goyaml-parse';
import { parseSelector, SelectorError, type SelectionSpec } from './filter';

export interface BugReportConfig {
  orchConfigPath?: string;
  context?: string;
  meshNamespace?: string;
  dryRun?: boolean;
  fullSecrets?: boolean;
  commandTimeoutMs?: number;
  include?: SelectionSpec[];
  exclude?: SelectionSpec[];
  startTime?: string;
  endTime?: string;
  sinceMs?: number;
  criticalErrors?: string[];
  ignoredErrors?: string[];
}

export class BugReportConfigError extends Error {}

/** Istio's spellings of the renamed keys are read too, so an Istio user's file keeps working. */
const ALIASES: Record<string, string> = { kubeConfigPath: 'orchConfigPath', istioNamespace: 'meshNamespace' };

function duration(v: unknown, where: string): number {
  // config.Duration: a Go duration string, or a number of nanoseconds.
  if (typeof v === 'number') return v / 1e6;
  if (typeof v !== 'string') throw new BugReportConfigError(`${where}: expected a duration, got ${JSON.stringify(v)}`);
  try {
    return parseDurationMs(v);
  } catch (e) {
    if (e instanceof DurationError) throw new BugReportConfigError(`${where}: ${e.message}`);
    throw e;
  }
}

function time(v: unknown, where: string): string {
  const s = v instanceof Date ? v.toISOString() : v;
  if (typeof s !== 'string' || Number.isNaN(Date.parse(s)))
    throw new BugReportConfigError(`${where}: expected an RFC 3339 time, got ${JSON.stringify(v)}`);
  return s;
}

function strings(v: unknown, where: string): string[] {
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw new BugReportConfigError(`${where}: expected a list of strings`);
  return v as string[];
}

export function parseBugReportConfig(text: string, source: string): BugReportConfig {
  let doc: unknown;
  try {
    doc = parseGoYaml(text);
  } catch (e) {
    if (e instanceof GoYamlParseError) throw new BugReportConfigError(`${source}: ${e.message}`);
    throw e;
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new BugReportConfigError(`${source}: expected a YAML mapping`);
  const out: BugReportConfig = {};
  for (const [rawKey, v] of Object.entries(doc as Record<string, unknown>)) {
    const key = ALIASES[rawKey] ?? rawKey;
    const where = `${source}: ${rawKey}`;
    const str = (): string => {
      if (typeof v !== 'string') throw new BugReportConfigError(`${where}: expected a string`);
      return v;
    };
    const bool = (): boolean => {
      if (typeof v !== 'boolean') throw new BugReportConfigError(`${where}: expected true or false`);
      return v;
    };
    const selectors = (): SelectionSpec[] =>
      strings(v, where).map((s, i) => {
        try {
          return parseSelector(s);
        } catch (e) {
          if (e instanceof SelectorError) throw new BugReportConfigError(`${source}: ${rawKey}[${i}]: ${e.message}`);
          throw e;
        }
      });
    switch (key) {
      case 'orchConfigPath':
        out.orchConfigPath = str();
        break;
      case 'context':
        out.context = str();
        break;
      case 'meshNamespace':
        out.meshNamespace = str();
        break;
      case 'dryRun':
        out.dryRun = bool();
        break;
      case 'fullSecrets':
        out.fullSecrets = bool();
        break;
      case 'commandTimeout':
        out.commandTimeoutMs = duration(v, where);
        break;
      case 'include':
        out.include = selectors();
        break;
      case 'exclude':
        out.exclude = selectors();
        break;
      case 'startTime':
        out.startTime = time(v, where);
        break;
      case 'endTime':
        out.endTime = time(v, where);
        break;
      case 'since':
        out.sinceMs = duration(v, where);
        break;
      case 'criticalErrors':
        out.criticalErrors = strings(v, where);
        break;
      case 'ignoredErrors':
        out.ignoredErrors = strings(v, where);
        break;
      default:
        throw new BugReportConfigError(`${where}: unknown field`);
    }
  }
  return out;
}
