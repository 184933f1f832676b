// Collects errors and warnings with their field paths while a validator walks a resource.
import type { AnalysisFinding, FieldError } from '../errors';

export interface ValidationResult {
  errors: FieldError[];
  warnings: FieldError[];
}

export class Report {
  readonly errors: FieldError[] = [];
  readonly warnings: FieldError[] = [];

  /**
   * `strictFields`: unknown fields are errors, as Istio's strict decoding makes them for `istioctl
   * validate`. Off, they are warnings: the API server prunes them and kubectl warns.
   */
  constructor(readonly strictFields = false) {}

  error(field: string, message: string | undefined): void {
    if (message !== undefined) this.errors.push({ field, message });
  }
  warn(field: string, message: string | undefined, analysis?: AnalysisFinding): void {
    if (message !== undefined) this.warnings.push(analysis ? { field, message, analysis } : { field, message });
  }
  /** Istio's warnUnused: `virtualService rule <rule> not used (<reason>)`. */
  unusedRule(field: string, rule: string, reason: string): void {
    this.warn(field, `virtualService rule ${rule} not used (${reason})`, { type: 'VirtualServiceUnreachableRule', params: [rule, reason] });
  }
  /** Istio's warnIneffective: `virtualService rule <rule> match <match> is not used (duplicate/overlapping match in rule <dup>)`. */
  ineffectiveMatch(field: string, rule: string, match: string, dup: string): void {
    this.warn(field, `virtualService rule ${rule} match ${match} is not used (duplicate/overlapping match in rule ${dup})`, {
      type: 'VirtualServiceIneffectiveMatch',
      params: [rule, match, dup],
    });
  }
  /** Errors found since `mark` (a previous `errors.length`). */
  errorsSince(mark: number): number {
    return this.errors.length - mark;
  }
  result(): ValidationResult {
    return { errors: this.errors, warnings: this.warnings };
  }
}

/** `base[i]` */
export function at(base: string, i: number): string {
  return `${base}[${i}]`;
}

/** `base[key]` (map keys, Kubernetes field-path style) */
export function key(base: string, k: string): string {
  return `${base}[${k}]`;
}

/** `base.name` */
export function dot(base: string, name: string): string {
  return base === '' ? name : `${base}.${name}`;
}
