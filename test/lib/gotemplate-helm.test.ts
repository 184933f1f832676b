// The Helm layer over the Go template engine: one template set per chart (a define in a helper is visible to
// every file), include/tpl/toYaml/fromYaml/required with Helm's semantics, "<no value>" rendered empty.
import t from 'tap';
import { ChartRenderError, renderChart } from '../../src/lib/gotemplate/helm';

const render = (files: Record<string, string>, values: unknown = {}) =>
  renderChart('c', new Map(Object.entries(files)), values, { name: 'rel', namespace: 'ns' }).files;

t.test('helpers, include and the release', async (t) => {
  const out = render(
    {
      'templates/_helpers.tpl': '{{- define "c.labels" -}}\napp: {{ .Values.app }}\nrelease: {{ .Release.Name }}\n{{- end }}',
      'templates/a.yaml': 'metadata:\n  namespace: {{ .Release.Namespace }}\n  labels:\n    {{- include "c.labels" . | nindent 4 }}\n',
    },
    { app: 'x' },
  );
  t.same([...out.keys()], ['templates/a.yaml'], 'helpers render nothing of their own');
  t.equal(out.get('templates/a.yaml'), 'metadata:\n  namespace: ns\n  labels:\n    app: x\n    release: rel\n');
});

t.test('toYaml / fromYaml / tpl / missing values', async (t) => {
  const out = render(
    {
      'templates/a.yaml':
        'r:\n{{ toYaml .Values.r | indent 2 }}\nm: {{ (fromYaml "a: 1\\nb: [x]").b | first }}\nt: {{ tpl "{{ .Values.name }}-svc" . }}\nmissing: "{{ .Values.nope }}"\n',
    },
    { r: { requests: { memory: '1Gi', cpu: '100m' } }, name: 'meshd' },
  );
  // sigs.k8s.io/yaml key order (sorted), Helm's toYaml without the trailing newline.
  t.equal(out.get('templates/a.yaml'), 'r:\n  requests:\n    cpu: 100m\n    memory: 1Gi\nm: x\nt: meshd-svc\nmissing: ""\n');
});

t.test('required and parse errors name the template', async (t) => {
  t.throws(() => render({ 'templates/a.yaml': '{{ required "value x is required" .Values.x }}' }), {
    message: /c\/templates\/a\.yaml: .*value x is required/,
  });
  let err: unknown;
  try {
    render({ 'templates/b.yaml': '{{ if }}' });
  } catch (e) {
    err = e;
  }
  t.ok(err instanceof ChartRenderError, 'a chart error, not a crash');
  t.match((err as Error).message, /c\/templates\/b\.yaml:1: missing value for if/);
});
