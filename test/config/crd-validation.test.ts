// The API server's check of Istio custom resources (src/config/crd), with no API server:
// - Istio 1.26.8's own CRD validation cases (pkg/config/validation/testdata/crds, vendored under
//   fixtures/istio-crd-validation): every document without `_err` is accepted, every other one rejected with
//   an error containing `_err`, as Istio's TestCRDs asserts against crd-all.gen.yaml;
// - the Kubernetes CEL functions registered on @bufbuild/cel, with Kubernetes' own expectations
//   (apiextensions-apiserver schema/cel validation_test.go, library/urls.go examples) and cel-go's conversions;
// - Go's net/url verdicts the URL functions rest on.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { celEnv, isCelError, parse, plan } from '@bufbuild/cel';
import t from 'tap';
import { kubernetesCelEnv } from '../../src/config/crd/cel-library';
import { validateCustomResource } from '../../src/config/crd';
import type { Schema } from '../../src/config/crd/openapi';
import { validateRules } from '../../src/config/crd/rules';
import { parseDocuments } from '../../src/config/parse';
import { validateConfig } from '../../src/config/validate';
import { parseRequestURI, parseURL } from '../../src/lib/gourl';
import { REPO } from '../helpers/spec';

const DIR = path.join(REPO, 'test/config/fixtures/istio-crd-validation');

// Where Istio's test validator and the API server part ways, the API server's words are expected (checked against
// kube-apiserver 1.36 by crd-validation-apiserver.test.ts):
// - `x: null` on a field that is not nullable: the API server drops the field first
//   (PruneNonNullableNullsWithoutDefaults), so a required one is missing; Istio's validator skips that step (and
//   its openapi_test.go skips these cases: "Kubernetes will reject something like `foo: null`");
// - the `yaml` package reads the flow item `001:db8::]` as a one-key map where Go's YAML reader (Istio's test) reads
//   the string "001:db8::": the reading differs before validation starts.
const DIFFERS: Record<string, string> = {
  'wasm-invalid.yaml/nil': 'spec: Required value',
  'wasm-invalid.yaml/nested-nil': 'spec.url: Required value',
  'serviceentry-valid.yaml/full': 'spec.addresses[1]: Invalid value: "object": spec.addresses[1] in body must be of type string: "object"',
};

t.test("Istio's CRD validation cases (TestCRDs)", async (t) => {
  const files = readdirSync(DIR).filter((f) => f.endsWith('.yaml'));
  t.equal(files.length, 20, 'the twenty files of Istio 1.26.8');
  let cases = 0;
  for (const file of files) {
    const text = readFileSync(path.join(DIR, file), 'utf8');
    const parsed = parseDocuments(text, file);
    t.same(parsed.errors, [], `${file} parses`);
    for (const c of parsed.configs) {
      const obj = { ...parsed.objects.get(c)! };
      const want = obj._err as string | undefined;
      delete obj._err;
      cases++;
      const errors = validateCustomResource(c.kind, obj).map((e) => `${e.field}: ${e.body}`);
      const got = `${c.kind}/${c.meta.name}/${c.meta.namespace}: ${errors.join(', ')}`;
      const id = `${file}/${c.meta.name}`;
      if (DIFFERS[id]) {
        t.ok(got.includes(DIFFERS[id]), `${id}: rejected with ${JSON.stringify(DIFFERS[id])}`, { got });
        continue;
      }
      if (want === undefined) t.same(errors, [], `${id}: accepted`);
      else t.ok(errors.length > 0 && got.includes(want), `${id}: rejected with ${JSON.stringify(want)}`, { got });
    }
  }
  t.equal(cases, 101, 'every document was checked');
});

t.test("the API server's phrasing: field, value or schema type, message", async (t) => {
  const authz = {
    apiVersion: 'security.istio.io/v1',
    kind: 'AuthorizationPolicy',
    metadata: { name: 'a' },
    spec: { rules: [{ from: [{ source: { serviceAccounts: ['bar/sa'], principals: ['p'] } }] }] },
  };
  t.same(validateCustomResource('AuthorizationPolicy', authz), [
    { field: 'spec.rules[0].from[0].source', type: 'Invalid', body: 'Invalid value: Cannot set serviceAccounts with namespaces or principals' },
  ]);
  // an enum violation stops the rules: kube-apiserver's hasBlockingErr
  const peer = {
    apiVersion: 'security.istio.io/v1',
    kind: 'PeerAuthentication',
    metadata: { name: 'p' },
    spec: { mtls: { mode: 'BLAH' }, portLevelMtls: { '80': { mode: 'STRICT' } } },
  };
  t.same(
    validateCustomResource('PeerAuthentication', peer).map((e) => `${e.field}: ${e.body}`),
    [
      'spec.mtls.mode: Unsupported value: "BLAH": supported values: "UNSET", "DISABLE", "PERMISSIVE", "STRICT"',
      '<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation',
    ],
  );
  // Istio's oneof as the CRD spells it (not anyOf required, or exactly one required): kube-openapi's
  // MustValidateOnlyOneSchemaError, a plain error the API server puts on a nil path
  const vs = {
    apiVersion: 'networking.istio.io/v1',
    kind: 'VirtualService',
    metadata: { name: 'v' },
    spec: { hosts: ['a'], http: [{ match: [{ uri: { exact: '/a', prefix: '/b' } }], route: [{ destination: { host: 'a' } }] }] },
  };
  t.same(
    validateCustomResource('VirtualService', vs).map((e) => `${e.field}: ${e.body}`),
    ['<nil>: Invalid value: "": "spec.http[0].match[0].uri" must validate one and only one schema (oneOf). Found 2 valid alternatives'],
  );
  t.same(validateCustomResource('Service', { spec: {} }), [], 'kinds without a CRD are not checked here');
});

t.test('where rules run: every node present, paths as the API server writes them, transition rules never', async (t) => {
  const schema: Schema = {
    type: 'object',
    properties: {
      list: { type: 'array', items: { type: 'integer', 'x-kubernetes-validations': [{ rule: 'self > 0', message: 'positive' }] } },
      labels: { type: 'object', additionalProperties: { type: 'string', 'x-kubernetes-validations': [{ rule: 'self != "x"' }] } },
      name: { type: 'string', 'x-kubernetes-validations': [{ rule: 'self == oldSelf', message: 'immutable' }] },
      absent: { type: 'string', 'x-kubernetes-validations': [{ rule: 'false', message: 'never evaluated' }] },
    },
  };
  t.same(
    validateRules(schema, { list: [1, 0], labels: { a: 'x' }, name: 'n' }, 'spec').map((e) => `${e.field}: ${e.body}`),
    // failed rule: <rule> when there is no message (validation.go ruleMessageOrDefault)
    ['spec.list[1]: Invalid value: 0: positive', 'spec.labels[a]: Invalid value: "x": failed rule: self != "x"'],
  );
});

t.test('validateConfig with the object as written: CRD errors first and alone, as the API server rejects before the webhook', async (t) => {
  const text = `apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: w, namespace: ns}
spec:
  url: fake://example.com
`;
  const p = parseDocuments(text, 'w.yaml');
  const c = p.configs[0]!;
  t.same(validateConfig(c, { object: p.objects.get(c)! }).errors, [
    { field: 'spec.url', message: 'Invalid value: "fake://example.com": url must have schema one of [http, https, file, oci]' },
  ]);
  t.same(
    validateConfig(c).errors,
    [{ field: 'spec.url', message: 'url contains unsupported scheme: fake' }],
    "without the object: Istio's webhook message",
  );
});

/** Evaluates `expr` in the rule environment with `self` bound. */
function cel(expr: string, self: unknown = null): unknown {
  const r = plan(kubernetesCelEnv(), parse(expr))({ self } as never);
  return isCelError(r) ? `error: ${r.message}` : r;
}

t.test('Kubernetes URL library: isURL, url, getScheme (urls.go examples, validation_test.go)', async (t) => {
  t.equal(cel("isURL('https://user:pass@example.com:80/path?query=val#fragment')"), true);
  t.equal(cel("isURL('/absolute-path')"), true);
  t.equal(cel("isURL('/path') == true"), true);
  t.equal(cel("isURL('https://a:b:c/')"), false);
  t.equal(cel("isURL('../relative-path')"), false);
  t.equal(cel("url('https://user:pass@example.com:80/path?query=val#fragment').getScheme()"), 'https');
  t.equal(cel("url('/absolute-path').getScheme()"), '');
  t.equal(cel('url(self).getScheme()', 'https://kubernetes.io:80/docs/home?k1=a&k2=b&k2=c#right'), 'https');
  t.match(
    cel("url('https://a:b:c/')"),
    /^error: URL parse error during conversion from string: parse "https:\/\/a:b:c\/": invalid port ":c" after host$/,
  );
  t.match(
    cel("url('../relative-path')"),
    /^error: URL parse error during conversion from string: parse "\.\.\/relative-path": invalid URI for request$/,
  );
  // Istio's WasmPlugin rule (crd-all.gen.yaml), on the inputs of its CRD test cases
  const wasm =
    'isURL(self) ? (url(self).getScheme() in ["", "http", "https", "oci", "file"]) : (isURL("http://" + self) && url("http://" + self).getScheme() in ["", "http", "https", "oci", "file"])';
  t.equal(cel(wasm, 'http://test'), true);
  t.equal(cel(wasm, 'example.com/filter.wasm'), true);
  t.equal(cel(wasm, '#%blah$#@'), false);
  t.equal(cel(wasm, 'fake://example.com'), false);
});

t.test('conversions as cel-go does them: int(string), duration(string)', async (t) => {
  t.equal(cel("int('443')"), 443n);
  t.equal(cel("int('-9223372036854775808')"), -9223372036854775808n);
  t.equal(cel("int('acd')"), "error: type conversion error from 'string' to 'int'");
  t.equal(cel("int('1.5')"), "error: type conversion error from 'string' to 'int'");
  t.equal(cel("int('9223372036854775808')"), "error: type conversion error from 'string' to 'int'");
  t.equal(cel("duration('1h30m') > duration('1h')"), true);
  t.equal(cel("duration('100us') >= duration('1ms')"), false);
  t.equal(cel("duration('1.5s') == duration('1500ms')"), true);
  t.equal(cel("duration('1d')"), "error: type conversion error from 'string' to 'google.protobuf.Duration'");
  t.equal(
    cel("duration('')"),
    "error: type conversion error from 'string' to 'google.protobuf.Duration'",
    "Go's ParseDuration refuses the empty string",
  );
});

t.test('strings extension and RE2 matches, as the rules use them', async (t) => {
  t.equal(cel('self.substring(7, 8)', 'unix:///var/run/x.sock'), '/');
  t.equal(cel("self.all(key, size(key) < 63 && key.matches('^[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?$'))", new Map([['http', 1n]])), true);
  t.equal(cel("self.all(key, size(key) < 63 && key.matches('^[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?$'))", new Map([['-bad', 1n]])), false);
  t.match(cel("'a'.matches('(')"), /^error: error parsing regexp: missing closing \): `\(`$/, "Go's regexp message");
  // the standard environment stays untouched: only the rule environment has Kubernetes' functions
  t.ok(isCelError(plan(celEnv(), parse("isURL('/x')"))()), 'isURL is not in a plain environment');
});

t.test("Go's net/url: what ParseRequestURI and Parse accept", async (t) => {
  const ok = (f: (s: string) => unknown, s: string) => {
    try {
      f(s);
      return 'ok';
    } catch (e) {
      return (e as Error).message;
    }
  };
  // Go's net/url error texts (url.go), for the inputs of its url_test.go kinds
  const verdicts: Array<[(s: string) => unknown, string, string]> = [
    [parseRequestURI, 'http://test', 'ok'],
    [parseRequestURI, 'oci://example.com/filter:v1', 'ok'],
    [parseRequestURI, '', 'parse "": empty url'],
    [parseRequestURI, ':foo', 'parse ":foo": missing protocol scheme'],
    [parseRequestURI, 'foo/bar', 'parse "foo/bar": invalid URI for request'],
    [parseRequestURI, 'http://[::1', 'parse "http://[::1": missing \']\' in host'],
    [parseRequestURI, 'http://a b.com/', 'parse "http://a b.com/": invalid character " " in host name'],
    [parseRequestURI, 'http://x/%zz', 'parse "http://x/%zz": invalid URL escape "%zz"'],
    [parseRequestURI, 'http://us er@x/', 'parse "http://us er@x/": net/url: invalid userinfo'],
    [parseRequestURI, 'http://x\n/', 'parse "http://x\\n/": net/url: invalid control character in URL'],
    [parseURL, 'a:b/c#frag', 'ok'],
    [parseURL, '1a:b', 'parse "1a:b": first path segment in URL cannot contain colon'],
  ];
  for (const [f, input, want] of verdicts) t.equal(ok(f, input), want, `${f.name}(${JSON.stringify(input)})`);
  t.same(parseURL('https://user:pass@example.com:80/path?query=val#fragment'), {
    scheme: 'https',
    opaque: '',
    user: 'user:pass',
    host: 'example.com:80',
    path: '/path',
    rawQuery: 'query=val',
    fragment: 'fragment',
  });
  t.equal(parseRequestURI('HTTP://x/').scheme, 'http', 'schemes are lower-cased');
});
