// Issue 24 items 2 and 3 as tables over the pure functions: the HCM's path handling per Istio
// pathNormalization setting, and header matching with repeated header fields (RBAC rules, route conditions,
// Istio's notValues). Expectations are what the real Envoy answered for the same input
// (fixtures/path-header-cases.ts); the byte-level tests are test/e2e/header-path.test.ts (built gateway)
// and test/proxy/envoy-parity.test.ts (built binary beside the installed Envoy).
import t from 'tap';
import type { JsonObject } from '@bufbuild/protobuf';
import { HttpConnectionManagerSchema } from '../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { HeaderMatcherSchema } from '../../src/gen/envoy/config/route/v3/route_components_pb';
import { RBACSchema } from '../../src/gen/envoy/config/rbac/v3/rbac_pb';
import { pathOptionsOf, processPath } from '../../src/proxy/http/path';
import { RequestHeaders, type RawHeaders } from '../../src/proxy/codec/headers';
import { compileHeaderMatcher } from '../../src/proxy/route/match';
import { RbacEngine } from '../../src/proxy/rbac/engine';
import { HEADER_CASES, PATH_CASES, PATH_MODE_HCM, PATH_MODES } from './fixtures/path-header-cases';
import { pb } from './helpers';

function verdict(path: string, mode: (typeof PATH_MODES)[number]): string {
  const o = pathOptionsOf(pb(HttpConnectionManagerSchema, { stat_prefix: 'p', ...PATH_MODE_HCM[mode] } as JsonObject));
  const r = processPath(path, o);
  return r.action === 'reject' ? '400' : r.action === 'redirect' ? `307 ${r.path}` : r.path;
}

t.test('path handling per pathNormalization setting, as Envoy does it', async (t) => {
  for (const c of PATH_CASES) {
    PATH_MODES.forEach((mode, i) => t.equal(verdict(c.path, mode), c.want[i], `${mode} ${c.path}`));
  }
});

t.test('a fragment is refused in every mode, a relative target too (Envoy answers 400)', async (t) => {
  for (const mode of PATH_MODES) {
    t.equal(verdict('/a#frag', mode), '400', `${mode} /a#frag`);
    t.equal(verdict('../%2Fa../b', mode), '400', `${mode} ../%2Fa../b`);
  }
});

function headersOf(fields: ReadonlyArray<readonly [string, string]>): RequestHeaders {
  const raw: RawHeaders = {};
  for (const [k, v] of fields) {
    const prev = raw[k];
    raw[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return new RequestHeaders('GET', '/x', 'h', 'http', raw);
}

t.test('header matchers look at every value of a repeated header (CVE-2026-26308 as fixed Envoy does)', async (t) => {
  for (const c of HEADER_CASES) {
    const m = compileHeaderMatcher(pb(HeaderMatcherSchema, c.matcher as JsonObject), 'm');
    t.equal(m(headersOf(c.fields)), c.want, c.what);
  }
});

t.test('an RBAC DENY on a header value and Istio notValues see every value', async (t) => {
  const rbac = (policies: JsonObject) => new RbacEngine(pb(RBACSchema, { action: 'DENY', policies }), 'rbac');
  const input = (fields: ReadonlyArray<readonly [string, string]>) => {
    const headers = headersOf(fields);
    return { headers, path: headers.pathOnly(), connection: {} as never, dynamicMetadata: undefined };
  };
  // what Istio generates for `when: [{key: request.headers[x-block], values: [yes]}]`
  const deny = rbac({
    'ns[deny]-rule[0]': {
      permissions: [{ any: true }],
      principals: [{ and_ids: { ids: [{ or_ids: { ids: [{ header: { name: 'x-block', string_match: { exact: 'yes' } } }] } }] } }],
    },
  });
  t.equal(
    deny.evaluate(
      input([
        ['x-block', 'no'],
        ['x-block', 'yes'],
      ]),
    ).allowed,
    false,
    'no then yes: denied',
  );
  t.equal(
    deny.evaluate(
      input([
        ['x-block', 'yes'],
        ['x-block', 'no'],
      ]),
    ).allowed,
    false,
    'yes then no: denied',
  );
  t.equal(
    deny.evaluate(
      input([
        ['x-block', 'no'],
        ['x-block', 'no'],
        ['x-block', 'yes'],
      ]),
    ).allowed,
    false,
    'three copies: denied',
  );
  t.equal(deny.evaluate(input([['x-block', 'no']])).allowed, true, 'no: allowed');
  // `notValues: [good]`: Istio's not_id over the header rule; Envoy 1.39.3 lets good+evil through (the negated rule matches on "good")
  const notValues = rbac({
    p: {
      permissions: [{ any: true }],
      principals: [{ not_id: { or_ids: { ids: [{ header: { name: 'x-notv', string_match: { exact: 'good' } } }] } } }],
    },
  });
  t.equal(
    notValues.evaluate(
      input([
        ['x-notv', 'good'],
        ['x-notv', 'evil'],
      ]),
    ).allowed,
    true,
    'good and evil: allowed, as Envoy 1.39.3',
  );
  t.equal(
    notValues.evaluate(
      input([
        ['x-notv', 'evil'],
        ['x-notv', 'good'],
      ]),
    ).allowed,
    true,
    'evil and good: allowed, as Envoy 1.39.3',
  );
  t.equal(notValues.evaluate(input([['x-notv', 'evil']])).allowed, false, 'evil alone: denied');
  t.equal(notValues.evaluate(input([])).allowed, false, 'absent: denied');
});

t.test('pseudo-headers answer getAll like any header', async (t) => {
  const h = new RequestHeaders('POST', '/p?q', 'a.b', 'https', {});
  t.same(h.getAll(':method'), ['POST']);
  t.same(h.getAll(':authority'), ['a.b']);
  t.same(h.getAll('host'), ['a.b']);
  t.same(h.getAll(':nope'), []);
});
