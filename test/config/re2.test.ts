// RE2 syntax check: Go's regexp accepts and rejects exactly these, with these messages
// (regexp/syntax error codes; the offending text in backquotes).
import t from 'tap';
import { re2SyntaxError } from '../../src/lib/re2';

const accepted = [
  '^/api/v[0-9]+/.*$',
  '(?P<rest>.*)',
  '(?<name>x)',
  '(?i)admin',
  '(?i:a)b',
  '(?s).',
  '\\z',
  '\\A\\b\\B',
  '\\pL\\p{Greek}\\PN',
  '[[:alpha:]_]+',
  '\\Qa.b*\\E',
  'a{2,5}?',
  'a{,3}',
  '[]a]',
  '[a-]',
  '\\12',
  '\\x41\\x{1F600}',
  '.*?',
  'a|b|',
  '()',
  '[\\d\\s\\w-]',
  '\\.\\*',
];
const rejected: Array<[string, string]> = [
  ['(?=a)', 'invalid or unsupported Perl syntax: `(?=`'],
  ['(?!a)', 'invalid or unsupported Perl syntax: `(?!`'],
  ['(?<=a)b', 'invalid named capture: `(?<=a)b`'],
  ['(?<!a)b', 'invalid named capture: `(?<!a)b`'],
  ['(a)\\1', 'invalid escape sequence: `\\1`'],
  ['\\k<n>', 'invalid escape sequence: `\\k`'],
  ['\\8', 'invalid escape sequence: `\\8`'],
  ['(abc', 'missing closing ): `(abc`'],
  ['abc)', 'unexpected ): `abc)`'],
  ['[abc', 'missing closing ]: `[abc`'],
  ['*a', 'missing argument to repetition operator: `*`'],
  ['a|+', 'missing argument to repetition operator: `+`'],
  ['a**', 'invalid nested repetition operator: `**`'],
  ['x{2}{3}', 'invalid nested repetition operator: `{2}{3}`'],
  ['a{1001}', 'invalid repeat count: `{1001}`'],
  ['a{3,2}', 'invalid repeat count: `{3,2}`'],
  ['[z-a]', 'invalid character class range: `z-a`'],
  ['[[:word2:]]', 'invalid character class range: `[:word2:]`'],
  ['(?P<>x)', 'invalid named capture: `(?P<>`'],
  ['\\', 'trailing backslash at end of expression: ``'],
];

t.test('RE2 accepts', async (t) => {
  for (const p of accepted) t.equal(re2SyntaxError(p), undefined, p);
});
t.test('RE2 rejects with Go messages', async (t) => {
  for (const [p, msg] of rejected) t.equal(re2SyntaxError(p), `error parsing regexp: ${msg}`, p);
});
t.test('a lookahead JavaScript accepts is rejected', async (t) => {
  t.doesNotThrow(() => new RegExp('(?=a)'));
  t.not(re2SyntaxError('(?=a)'), undefined);
});
