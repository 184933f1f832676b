// Reading `iptables-save` output and comparing it with the rules we want. Pure: the executor feeds
// the text in and runs the commands that come out.
//
// The kernel prints rules in its own canonical form (`-m tcp`, hex marks, reordered matches), so the
// comparison never compares rule text: it checks that our chains exist with the expected number of
// rules, and leaves the per-rule proof to `iptables -C` (see checkCommands in rules.ts).

import { chainsToCreate, isOwnChain, undoCommands, type Rule } from './rules';

/** table → chain → rule lines (as printed, `-A CHAIN ...`). Declared chains appear even when empty. */
export type SavedState = Map<string, Map<string, string[]>>;

export function parseSave(text: string): SavedState {
  const state: SavedState = new Map();
  let table: Map<string, string[]> | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line === 'COMMIT') continue;
    if (line.startsWith('*')) {
      const name = line.slice(1).trim();
      table = state.get(name) ?? new Map();
      state.set(name, table);
      continue;
    }
    if (!table) continue;
    if (line.startsWith(':')) {
      const chain = line.slice(1).split(/\s+/)[0]!;
      if (!table.has(chain)) table.set(chain, []);
      continue;
    }
    const words = tokenize(line);
    if ((words[0] === '-A' || words[0] === '--append') && words[1]) {
      const chain = words[1];
      table.set(chain, [...(table.get(chain) ?? []), line]);
    }
  }
  return state;
}

/** Splits a saved rule into arguments; iptables-save double-quotes arguments with spaces (comments). */
export function tokenize(line: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|(\S+)/g;
  for (let m = re.exec(line); m; m = re.exec(line)) {
    out.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : m[2]!);
  }
  return out;
}

export function ownChains(state: SavedState): Array<{ table: string; chain: string }> {
  const out: Array<{ table: string; chain: string }> = [];
  for (const [table, chains] of state) {
    for (const chain of chains.keys()) if (isOwnChain(chain)) out.push({ table, chain });
  }
  return out;
}

export type StateVerdict =
  /** No MESH_ chain exists: the rules have to be applied. */
  | { kind: 'clean' }
  /** Our chains have the expected shape; `iptables -C` must confirm each rule. */
  | { kind: 'candidate' }
  /** Our chains exist but differ from what we would apply. */
  | { kind: 'drift'; reasons: string[] };

export function compareWithExpected(state: SavedState, expected: readonly Rule[]): StateVerdict {
  const current = ownChains(state);
  if (current.length === 0) return { kind: 'clean' };

  const expectedCounts = new Map<string, number>();
  for (const [table, chains] of chainsToCreate(expected)) {
    for (const chain of chains) if (isOwnChain(chain)) expectedCounts.set(`${table}/${chain}`, 0);
  }
  for (const r of expected) {
    const key = `${r.table}/${r.chain}`;
    if (expectedCounts.has(key)) expectedCounts.set(key, expectedCounts.get(key)! + 1);
  }

  const reasons: string[] = [];
  for (const [key, want] of expectedCounts) {
    const [table, chain] = key.split('/') as [string, string];
    const rules = state.get(table)?.get(chain);
    if (!rules) reasons.push(`chain ${chain} of table ${table} is missing`);
    else if (rules.length !== want) reasons.push(`chain ${chain} of table ${table} has ${rules.length} rules, expected ${want}`);
  }
  for (const { table, chain } of current) {
    if (!expectedCounts.has(`${table}/${chain}`)) reasons.push(`chain ${chain} of table ${table} is not part of this configuration`);
  }
  return reasons.length > 0 ? { kind: 'drift', reasons } : { kind: 'candidate' };
}

export interface CleanupPlan {
  /** `iptables` argument lists for rules this configuration puts into built-in chains without
   * jumping to our chains (interface exclusions, TPROXY marks...); best effort, they may be gone. */
  readonly commands: string[][];
  /** iptables-restore input deleting every jump into a MESH_ chain found in the saved state, then
   * flushing and deleting every MESH_ chain; empty when nothing of ours is installed. */
  readonly restore: string;
}

/**
 * How to remove everything we own. Jumps and chains come from the saved state, so leftovers of
 * other configurations go too, and are removed in one restore transaction per table: all jumps
 * first, then all flushes, then all deletions, so chains that jump to each other go in any order.
 */
export function cleanupPlan(state: SavedState, configured: readonly Rule[]): CleanupPlan {
  const commands = undoCommands(configured.filter((r) => !isOwnChain(jumpTargetOf(r.params) ?? '')));

  let restore = '';
  for (const [table, chains] of state) {
    const lines: string[] = [];
    for (const [chain, rules] of chains) {
      if (isOwnChain(chain)) continue;
      for (const line of rules) {
        if (isOwnChain(jumpTargetOf(tokenize(line)) ?? '')) lines.push(line.replace(/^(-A|--append)\b/, '-D'));
      }
    }
    const own = [...chains.keys()].filter(isOwnChain);
    for (const chain of own) lines.push(`-F ${chain}`);
    for (const chain of own) lines.push(`-X ${chain}`);
    if (lines.length > 0) restore += `* ${table}\n${lines.join('\n')}\nCOMMIT\n`;
  }
  return { commands, restore };
}

function jumpTargetOf(words: readonly string[]): string | undefined {
  const j = words.findIndex((w) => w === '-j' || w === '--jump');
  return j >= 0 ? words[j + 1] : undefined;
}
