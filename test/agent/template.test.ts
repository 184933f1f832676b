// Bootstrap templates (--templateFile) rendered as Go's text/template with Istio's toJSON and sprig, against
// Go's documented behaviour: trim markers, truthiness, if/else if/else, range (with variables and else),
// with, and/or returning the deciding argument, comparison functions, printf, js, toJson/toJSON (maps with
// sorted keys, as encoding/json writes them), "<no value>" for missing map keys, define/template, and Go's
// error messages.
import t from 'tap';
import { renderTemplate } from '../../src/agent/template';

const r = (src: string, data: Record<string, unknown> = {}) => renderTemplate(src, data, 'test');

t.test('values and fields', async (t) => {
  t.equal(r('{{ .a.b }}', { a: { b: 'x' } }), 'x');
  t.equal(r('{{ .n }}/{{ .f }}/{{ .t }}', { n: 15000, f: 0.5, t: true }), '15000/0.5/true');
  t.equal(r('[{{ .missing }}]', {}), '[<no value>]', 'a missing map key prints <no value>');
  t.equal(r('{{ .list }}', { list: ['a', 'b'] }), '[a b]');
  t.equal(r('{{ "lit" }} {{ 42 }} {{ `raw\\n` }}'), 'lit 42 raw\\n');
  t.equal(r('{{ $.a }}', { a: 'root' }), 'root');
  t.equal(r('{{/* a comment */}}x'), 'x');
});

t.test('trim markers remove whitespace on their side', async (t) => {
  t.equal(r('a  {{- "b" -}}  \n c'), 'abc');
  t.equal(r('a {{ "b" }} c'), 'a b c');
  t.equal(r('{{ 3 }} {{- -4 }}'), '3-4', 'a negative number is not a trim marker');
});

t.test('if / else if / else and truthiness', async (t) => {
  const tpl = '{{ if .a }}A{{ else if .b }}B{{ else }}C{{ end }}';
  t.equal(r(tpl, { a: 1 }), 'A');
  t.equal(r(tpl, { a: 0, b: 'x' }), 'B');
  t.equal(r(tpl, { a: '', b: [] }), 'C', 'empty string and empty list are false');
  t.equal(r(tpl, { a: {}, b: false }), 'C', 'empty map is false');
  t.equal(r(tpl, {}), 'C', 'missing is false');
  t.equal(r('{{ if and .a .b }}y{{ else }}n{{ end }}', { a: 1, b: 0 }), 'n');
  t.equal(r('{{ if or .a .b }}y{{ end }}', { a: 0, b: 'z' }), 'y');
  t.equal(r('{{ or .a .b }}', { a: '', b: 'second' }), 'second', 'or yields the first true argument');
  t.equal(r('{{ and .a .b }}', { a: 'first', b: 0 }), '0', 'and yields the first false argument');
  t.equal(r('{{ if not .a }}y{{ end }}', {}), 'y');
  t.equal(r('{{ if eq .c "gzip" }}gz{{ end }}', { c: 'gzip' }), 'gz');
  t.equal(r('{{ if eq .c "a" "b" }}in{{ end }}', { c: 'b' }), 'in', 'eq with several arguments is any-of');
  t.equal(r('{{ if lt .n 10 }}small{{ end }}', { n: 3 }), 'small');
});

t.test('range and with', async (t) => {
  t.equal(r('{{ range $i, $v := .l }}{{ $i }}={{ $v }};{{ end }}', { l: ['a', 'b'] }), '0=a;1=b;');
  t.equal(r('{{ range .l }}<{{ . }}>{{ end }}', { l: ['x', 'y'] }), '<x><y>', 'the dot is the element');
  t.equal(r('{{ range $k, $v := .m }}{{ $k }}:{{ $v }} {{ end }}', { m: { b: 2, a: 1 } }), 'a:1 b:2 ', 'maps iterate in key order');
  t.equal(r('{{ range .l }}x{{ else }}empty{{ end }}', { l: [] }), 'empty');
  t.equal(r('{{ with .a }}[{{ .b }}]{{ else }}none{{ end }}', { a: { b: 'in' } }), '[in]');
  t.equal(r('{{ with .a }}[{{ .b }}]{{ else }}none{{ end }}', {}), 'none');
  t.equal(r('{{ $x := .a }}{{ range .l }}{{ $x }}{{ . }}{{ end }}', { a: '-', l: [1, 2] }), '-1-2', 'outer variables are visible in a range');
});

t.test('functions and pipelines', async (t) => {
  t.equal(r('{{ toJson .b }}', { b: [{ prefix: 'x', buckets: [1, 2] }] }), '[{"buckets":[1,2],"prefix":"x"}]', 'a Go map marshals with sorted keys');
  t.equal(r('{{ toJSON .b }}|{{ toJSON .none }}', { b: { port: 15000 } }), '{"port":15000}|{}', "Istio's toJSON: {} for nil");
  t.equal(r('{{ .s | js }}', { s: `a"b'<c>\\` }), `a\\"b\\'\\u003Cc\\u003E\\\\`);
  t.equal(r('{{ printf "%s:%d" .h .p }}', { h: 'host', p: 15012 }), 'host:15012');
  t.equal(r('{{ len .l }}', { l: [1, 2, 3] }), '3');
  t.equal(r('{{ index .m "k" }}', { m: { k: 'v' } }), 'v');
  t.equal(r('{{ (index .l 1) }}', { l: ['a', 'b'] }), 'b');
});

t.test('errors read like Go and name the position', async (t) => {
  t.throws(() => r('{{ if .a }}x'), { message: 'template: test:1: unexpected EOF' });
  t.throws(() => r('x\n{{ end }}'), { message: 'template: test:2: unexpected {{end}}' });
  t.throws(() => r('{{ nope .a }}'), { message: 'template: test:1: function "nope" not defined' });
  t.equal(r('{{ define "x" }}[{{ . }}]{{ end }}{{ template "x" .a }}', { a: 'in' }), '[in]', 'define and template work');
  t.throws(() => r('{{ $y }}'), { message: 'template: test:1: undefined variable "$y"' });
  t.throws(() => r('{{ .a.b }}', { a: 'str' }), { message: /can't evaluate field b in type string/ });
  t.throws(() => r('{{ "x" .a }}'), { message: /can't give argument to non-function/ });
});
