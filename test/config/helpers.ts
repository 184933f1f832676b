// Shared helpers for the config tests: building resources and comparing validation results.
import type { Test } from 'tap';
import type { FieldError } from '../../src/config/errors';
import { SCHEMAS } from '../../src/config/schemas';
import type { Config, Kind } from '../../src/config/types';
import { validateConfig } from '../../src/config/validate';

export function mk<K extends Kind>(kind: K, spec: unknown, meta: Partial<Config['meta']> = {}): Config<K> {
  return {
    kind,
    apiVersion: SCHEMAS[kind].apiVersions[0]!,
    meta: { name: 'test', namespace: kind === 'Namespace' ? '' : 'default', labels: {}, annotations: {}, ...meta },
    spec: spec as Config<K>['spec'],
  } as Config<K>;
}

const sortErrs = (es: readonly FieldError[]): string[] => es.map((e) => `${e.field} :: ${e.message}`).sort();

/** The resource is rejected with exactly these [field, message] errors. */
export function rejects(t: Test, c: Config, expected: Array<[string, string]>, name?: string): void {
  const { errors } = validateConfig(c);
  t.same(sortErrs(errors), expected.map(([f, m]) => `${f} :: ${m}`).sort(), name ?? expected.map((e) => e[1]).join('; '));
}

/** The resource is accepted (no errors); optionally with exactly these warnings. */
export function accepts(t: Test, c: Config, warnings?: Array<[string, string]>, name?: string): void {
  const r = validateConfig(c);
  t.same(sortErrs(r.errors), [], name ?? `accepted ${c.kind}/${c.meta.name}`);
  if (warnings) t.same(sortErrs(r.warnings), warnings.map(([f, m]) => `${f} :: ${m}`).sort(), `${name ?? c.kind} warnings`);
}
