// Spec doc 3 §4.1/§4.2: every meshctl command, alias and flag the table names exists, with the short
// forms and the defaults the table states. Expectations are read from the spec text.
import t from 'tap';
import { section, specDoc, tableRows } from '../helpers/spec';
import { commandAt, flagOf, program } from '../helpers/programs';
import type { FlagSpec } from '../../commands/types';

const meshctl = program('meshctl');
const doc = specDoc(3);

interface Cmd {
  path: string[];
  aliases: string[];
}

/** `admin log (l)` → path admin/log with alias l; `install (apply), upgrade, manifest install (apply)` → three. */
function commandsOf(cell: string): Cmd[] {
  if (cell.startsWith('completion ')) return ['bash', 'fish', 'powershell', 'zsh'].map((s) => ({ path: ['completion', s], aliases: [] }));
  if (cell === 'experimental injector, injector list')
    return [
      { path: ['experimental', 'injector'], aliases: [] },
      { path: ['experimental', 'injector', 'list'], aliases: [] },
    ];
  return cell.split(/,\s*(?![^()]*\))/).map((part) => {
    const m = /^(.*?)\s*(?:\(([^)]*)\))?$/.exec(part.trim())!;
    return { path: m[1]!.split(' '), aliases: m[2] ? m[2].split(/,\s*/) : [] };
  });
}

const XDS = ['authority', 'cert-dir', 'insecure', 'plaintext', 'timeout', 'xds-address', 'xds-label', 'xds-port'];
const PROXYCFG = ['output', 'proxy-admin-port'];

/** Flag mentions `--name` or `--name/-x`, each with the text up to the next flag mention. */
function flagsOf(cell: string): Array<{ name: string; short?: string; text: string }> {
  const out: Array<{ name: string; short?: string; text: string }> = [];
  const re = /--([\w-]+)(?:\/-(\w))?/g;
  // Mentions inside backticks are values, not flags: an odd number of backticks before means inside.
  const marks = [...cell.matchAll(re)].filter((m) => (cell.slice(0, m.index).match(/`/g) ?? []).length % 2 === 0);
  marks.forEach((m, i) => {
    const end = i + 1 < marks.length ? marks[i + 1]!.index! : cell.length;
    out.push({ name: m[1]!, short: m[2], text: cell.slice(m.index! + m[0].length, end) });
  });
  return out;
}

/** The default the spec states for a flag mention, if it states one plainly. */
function statedDefault(text: string): string | undefined {
  const t1 = text.replace(/;\s*$/, '').trim();
  // Only plain one-word defaults; prose ("default excludes four system namespaces") and conditional ones are not values.
  let m = /default `([^`]+)`(?=\s*[);,]|$)/.exec(t1) ?? /default ([^\s;:),`]+)(?=[;:),]|$)/.exec(t1);
  if (m) return m[1]!.trim();
  m = /^(\d[\w.]*)\b/.exec(t1) ?? /^\((\d[\w.]*)\)/.exec(t1) ?? /^\((?:int|uint32)[^,]*, (?:default )?(\d[\w.]*)/.exec(t1);
  return m?.[1];
}

function zeroOf(f: FlagSpec): string[] {
  return { bool: ['false'], duration: ['0s', '0'], stringSlice: ['[]'], stringArray: ['[]'] }[f.type as string] ?? ['0', ''];
}

const rows = tableRows(section(doc, '### 4.2'), 'Command (aliases)');

t.test('§4.1 global flags on the root', async (t) => {
  const rowsG = tableRows(section(doc, '### 4.1'), 'Flag');
  t.equal(rowsG.length, 9);
  for (const [flag, short, type, def] of rowsG) {
    const name = flag!.replace(/^--/, '');
    const f = flagOf(meshctl, [], name);
    if (!t.ok(f, `--${name}`)) continue;
    t.equal(f!.short, short ? short.replace(/^-/, '') : undefined, `--${name} short`);
    t.equal(f!.type, type, `--${name} type`);
    if (def === 'empty' || def === '[]' || def === '0')
      t.ok(f!.default === undefined || zeroOf(f!).includes(f!.default) || f!.default === def, `--${name} zero default`);
    else t.equal(f!.default, def, `--${name} default`);
    t.ok(
      meshctl.root.persistentFlags?.some((p) => p.name === name),
      `--${name} is global`,
    );
  }
});

t.test('§4.2 every command, alias and flag', async (t) => {
  t.ok(rows.length > 55, `${rows.length} command rows`);
  for (const [cmdCell, , flagCell] of rows) {
    for (const c of commandsOf(cmdCell!)) {
      let found;
      try {
        found = commandAt(meshctl, c.path);
      } catch (e) {
        t.fail((e as Error).message);
        continue;
      }
      const where = `meshctl ${c.path.join(' ')}`;
      for (const a of c.aliases) t.ok(found.cmd.aliases?.includes(a), `${where} alias ${a}`);
      const cell = flagCell!;
      const names: Array<{ name: string; short?: string; text: string }> = flagsOf(cell);
      if (/\bXDS\b/.test(cell)) names.push(...XDS.map((name) => ({ name, text: '' })));
      if (/\bPROXYCFG\b/.test(cell)) names.push(...PROXYCFG.map((name) => ({ name, text: '' })));
      for (const n of names) {
        const f = flagOf(meshctl, c.path, n.name);
        if (!t.ok(f, `${where} --${n.name}`)) continue;
        if (n.short) t.equal(f!.short, n.short, `${where} --${n.name} short -${n.short}`);
        const d = statedDefault(n.text);
        if (d !== undefined) {
          const ours = f!.default ?? zeroOf(f!)[0];
          t.ok(
            ours === d || (zeroOf(f!).includes(d) && (f!.default === undefined || zeroOf(f!).includes(f!.default))),
            `${where} --${n.name} default ${d} (ours ${ours})`,
          );
        }
      }
    }
  }
});

t.test('XDS and PROXYCFG group defaults (§4.1)', async (t) => {
  t.match(flagOf(meshctl, ['proxy-status'], 'timeout'), { type: 'duration', default: '30s' });
  t.match(flagOf(meshctl, ['proxy-status'], 'xds-port'), { type: 'int', default: '15012' });
  t.match(flagOf(meshctl, ['proxy-config', 'route'], 'output'), { short: 'o', default: 'short' });
  t.match(flagOf(meshctl, ['proxy-config', 'route'], 'proxy-admin-port'), { type: 'int', default: '15000' });
});

t.test('§8 constants', async (t) => {
  t.match(flagOf(meshctl, ['analyze'], 'timeout'), { default: '30s' });
  t.match(flagOf(meshctl, ['install'], 'readiness-timeout'), { default: '5m0s' });
  t.match(flagOf(meshctl, ['waypoint', 'apply'], 'waypoint-timeout'), { default: '1m30s' });
  t.match(flagOf(meshctl, ['bug-report'], 'timeout'), { default: '30m0s' });
  t.match(flagOf(meshctl, ['experimental', 'workload', 'entry', 'configure'], 'tokenDuration'), { default: '3600' });
  t.match(flagOf(meshctl, ['experimental', 'metrics'], 'duration'), { default: '1m0s' });
  t.match(flagOf(meshctl, ['admin', 'log'], 'ctrlz_port'), { default: '9876' });
  t.match(flagOf(meshctl, ['analyze'], 'revision'), { default: 'default' });
  t.match(flagOf(meshctl, [], 'meshNamespace'), { default: 'mesh-system' });
});
