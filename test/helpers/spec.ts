// Reads the specification documents in ../shared/spec so tests check the product against the
// documented names, types and defaults rather than against our own tables.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

export const REPO = fileURLToPath(new URL('../..', import.meta.url));
/** ../shared beside the checkout; MESH_SHARED_DIR names it for a checkout elsewhere (a git worktree). */
export const SHARED = process.env.MESH_SHARED_DIR ?? path.resolve(REPO, '../shared');

export function specDoc(n: 1 | 2 | 3): string {
  const names = { 1: '01-discovery-and-claim-routing.md', 2: '02-agent-and-cni.md', 3: '03-meshctl.md' };
  return readFileSync(path.join(SHARED, 'spec', names[n]), 'utf8');
}

/** The text of a section, from its heading (e.g. `### 4.4`) to the next heading of the same or higher level. */
export function section(doc: string, heading: string): string {
  const lines = doc.split('\n');
  const start = lines.findIndex((l) => l.startsWith(heading + ' ') || l === heading);
  if (start < 0) throw new Error(`no section ${heading}`);
  const level = heading.split(' ')[0]!.length;
  let end = lines.length;
  for (let i = start + 1; i < lines.length; i++) {
    const m = /^(#+) /.exec(lines[i]!);
    if (m && m[1]!.length <= level) {
      end = i;
      break;
    }
  }
  return lines.slice(start, end).join('\n');
}

/** Rows of the first markdown table in `text` whose header starts with `firstHeader`. */
export function tableRows(text: string, firstHeader: string): string[][] {
  const lines = text.split('\n');
  const h = lines.findIndex((l) => l.startsWith(`| ${firstHeader} |`));
  if (h < 0) throw new Error(`no table headed ${firstHeader}`);
  const rows: string[][] = [];
  for (let i = h + 2; i < lines.length && lines[i]!.startsWith('|'); i++) {
    rows.push(
      lines[i]!.slice(1, -1)
        .split('|')
        .map((c) => c.trim()),
    );
  }
  return rows;
}

export interface SpecEnv {
  name: string;
  type: string;
  default: string | undefined;
  meaning: string;
}

/** Expands rows like `CNI_CONF_NAME, CNI_NETWORK_CONFIG` and `REPAIR_BROKEN_POD_LABEL_KEY / _VALUE`. */
export function envRows(rows: string[][]): SpecEnv[] {
  const out: SpecEnv[] = [];
  for (const [names, type, def, meaning] of rows) {
    if (!names || !type || !/^[BSIDF]$/.test(type)) continue;
    const defaults = def!.includes(' / ') ? def!.split(' / ') : undefined;
    let list: string[];
    if (names.includes(' / _')) {
      const [first, suffix] = names.split(' / ');
      list = [first!, first!.replace(/_[A-Z]+$/, suffix!)];
    } else list = names.split(/,\s*/);
    list.forEach((name, i) => {
      const d = defaults ? defaults[i]! : def!;
      out.push({ name: name.trim(), type, default: d === '-' || d === 'empty' ? undefined : d, meaning: meaning ?? '' });
    });
  }
  return out;
}

/** Spec doc 1 §8: the daemon's variables. */
export function discoveryEnv(): SpecEnv[] {
  return envRows(tableRows(section(specDoc(1), '## 8.'), 'Name'));
}

/** Spec doc 2 §8: agent variables then installer variables (split at AMBIENT_ENABLED). */
export function agentAndCniEnv(): { agent: SpecEnv[]; cni: SpecEnv[] } {
  const all = envRows(tableRows(section(specDoc(2), '## 8.'), 'Name'));
  const split = all.findIndex((e) => e.name === 'AMBIENT_ENABLED');
  return { agent: all.slice(0, split), cni: all.slice(split) };
}

/** Spec doc 2 §5: authentication variables of the agent. */
export function agentAuthEnv(): SpecEnv[] {
  return envRows(tableRows(section(specDoc(2), '## 5.'), 'Variable or flag'));
}
