// Telemetry and ProxyConfig (Istio's ValidateTelemetry and ValidateProxyConfig, same messages). An access-log
// filter must parse as CEL (Istio: cel.NewEnv().Parse, no type check); the parser is @bufbuild/cel's, so the text
// after Istio's `must be a valid CEL expression, ` is its syntax error, not cel-go's.
import { parse } from '@bufbuild/cel';
import type { Config, TelemetryProviderRef } from '../types';
import { checkWorkloadSelector } from './common';
import { at, dot, key, type Report } from './report';
import { checkSelectorAndRefs } from './security';

/** validateTelemetryProviders: every provider is named (one error per list, as Istio stops at the first). */
function checkProviders(providers: readonly TelemetryProviderRef[] | undefined, path: string, r: Report): void {
  const i = (providers ?? []).findIndex((p) => !p || !p.name);
  if (i >= 0) r.error(dot(at(path, i), 'name'), 'providers.name may not be empty');
}

export function validateTelemetry(c: Config<'Telemetry'>, r: Report): void {
  const s = c.spec;
  checkSelectorAndRefs(s, r);

  (s.metrics ?? []).forEach((m, i) => {
    const mp = at('spec.metrics', i);
    checkProviders(m.providers, dot(mp, 'providers'), r);
    (m.overrides ?? []).forEach((o, j) => {
      const op = at(dot(mp, 'overrides'), j);
      for (const [name, to] of Object.entries(o.tagOverrides ?? {})) {
        const tp = key(dot(op, 'tagOverrides'), name);
        if (name === '') r.warn(tp, 'tagOverrides.name may not be empty');
        // UPSERT is the default operation.
        const operation = to.operation ?? 'UPSERT';
        if (operation === 'UPSERT' && !to.value) r.error(dot(tp, 'value'), 'tagOverrides.value must be set when operation is UPSERT');
        if (operation === 'REMOVE' && to.value) r.error(dot(tp, 'value'), 'tagOverrides.value may only be set when operation is UPSERT');
      }
      if (o.match?.customMetric === '') r.error(dot(dot(op, 'match'), 'customMetric'), 'customMetric may not be empty');
    });
  });

  const tracing = s.tracing ?? [];
  if (tracing.length > 1) r.warn('spec.tracing', 'multiple tracing is not currently supported');
  tracing.forEach((t, i) => {
    const tp = at('spec.tracing', i);
    if ((t.providers ?? []).length > 1) r.warn(dot(tp, 'providers'), 'multiple providers is not currently supported');
    checkProviders(t.providers, dot(tp, 'providers'), r);
    const pct = t.randomSamplingPercentage;
    if (pct !== undefined && (pct < 0 || pct > 100))
      r.error(dot(tp, 'randomSamplingPercentage'), 'randomSamplingPercentage must be in range [0.0, 100.0]');
    for (const [name, tag] of Object.entries(t.customTags ?? {})) {
      const kp = key(dot(tp, 'customTags'), name);
      if (name === '') r.error(kp, 'tag name may not be empty');
      if (tag.literal && !tag.literal.value) r.error(dot(kp, 'literal.value'), 'literal tag value may not be empty');
      if (tag.header && !tag.header.name) r.error(dot(kp, 'header.name'), 'header tag name may not be empty');
      if (tag.environment && !tag.environment.name) r.error(dot(kp, 'environment.name'), 'environment tag name may not be empty');
    }
  });

  (s.accessLogging ?? []).forEach((l, i) => {
    const lp = at('spec.accessLogging', i);
    if (l.filter) {
      const err = celSyntaxError(l.filter.expression ?? '');
      if (err) r.error(dot(lp, 'filter.expression'), `must be a valid CEL expression, ${err}`);
    }
    checkProviders(l.providers, dot(lp, 'providers'), r);
  });
}

/** The parser's message for an expression that is not CEL, undefined when it parses. */
export function celSyntaxError(expression: string): string | undefined {
  try {
    // the newline: @bufbuild/cel 0.6 rejects a `// comment` that ends the input, which cel-go accepts
    parse(expression.includes('//') ? `${expression}\n` : expression);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

export function validateProxyConfig(c: Config<'ProxyConfig'>, r: Report): void {
  checkWorkloadSelector(c.spec.selector, 'spec.selector', r);
  if (c.spec.concurrency !== undefined && c.spec.concurrency < 0) r.error('spec.concurrency', 'concurrency must be greater than or equal to 0');
}
