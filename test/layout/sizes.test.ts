// Size limits that keep the wiring readable (issue 25): a start function (start*, prepare*, launch*, main,
// and a command's `run` handler) fits on a screen and a half, 80 lines; a class stays under 400 lines.
// Measured on the TypeScript syntax tree of every hand-written file under src/ (generated code apart). A
// method named run (the HTTP/1 parser's byte loop) is not a start function: it is one hot loop on purpose.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import ts from 'typescript';

const root = path.resolve(import.meta.dirname, '../..');
const START_FUNCTION_LINES = 80;
const CLASS_LINES = 400;
const START_NAME = /^(start|prepare|launch|main)([A-Z_]|$)/;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) return name === 'gen' && dir.endsWith('src') ? [] : sources(p);
    return p.endsWith('.ts') && !p.endsWith('.gen.ts') && !p.endsWith('.d.ts') ? [p] : [];
  });
}

interface Oversize {
  what: string;
  lines: number;
}

function oversized(file: string): Oversize[] {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const lines = (n: ts.Node) => sf.getLineAndCharacterOfPosition(n.getEnd()).line - sf.getLineAndCharacterOfPosition(n.getStart()).line + 1;
  const at = (n: ts.Node, name: string) => `${path.relative(root, file)}:${sf.getLineAndCharacterOfPosition(n.getStart()).line + 1} ${name}`;
  const out: Oversize[] = [];
  const visit = (n: ts.Node): void => {
    if (ts.isClassDeclaration(n) && lines(n) > CLASS_LINES) out.push({ what: at(n, `class ${n.name?.text ?? '(anonymous)'}`), lines: lines(n) });
    let name: string | undefined;
    if ((ts.isFunctionDeclaration(n) || ts.isMethodDeclaration(n)) && n.name) name = n.name.getText(sf);
    if (ts.isVariableDeclaration(n) && n.initializer && (ts.isArrowFunction(n.initializer) || ts.isFunctionExpression(n.initializer)))
      name = n.name.getText(sf);
    const handler = name === 'run' && !ts.isMethodDeclaration(n);
    if (name !== undefined && (START_NAME.test(name) || handler) && lines(n) > START_FUNCTION_LINES)
      out.push({ what: at(n, `${name}()`), lines: lines(n) });
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

t.test(`no start function over ${START_FUNCTION_LINES} lines, no class over ${CLASS_LINES}`, async (t) => {
  const files = sources(path.join(root, 'src'));
  t.ok(files.length > 400, `read every source file (${files.length})`);
  t.same(
    files.flatMap(oversized).map((o) => `${o.what}: ${o.lines} lines`),
    [],
  );
});

t.test('the measure itself: it finds an oversized start function and class', async (t) => {
  // A guard that cannot fail is no guard: feed it a file that breaks both limits.
  const { writeFileSync, mkdtempSync, rmSync } = await import('node:fs');
  const os = await import('node:os');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sizes-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const body = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join('\n');
  const file = path.join(dir, 'big.ts');
  writeFileSync(
    file,
    `export function startBig() {\n${body(80)}\n}\nexport const run = () => {\n${body(81)}\n};\nclass Big {\n  run() {\n${body(400)}\n  }\n}\n`,
  );
  t.same(
    oversized(file).map((o) => o.what.replace(/^.*big\.ts/, 'big.ts')),
    ['big.ts:1 startBig()', 'big.ts:83 run()', 'big.ts:166 class Big'],
  );
});
