// Unified diffs as go-difflib (a port of Python's difflib) writes them: SequenceMatcher's matching blocks
// (with its junk heuristic for long inputs), grouped into hunks with `context` lines around changes.

type Opcode = ['replace' | 'delete' | 'insert' | 'equal', number, number, number, number];

class SequenceMatcher {
  private b2j = new Map<string, number[]>();

  constructor(
    private readonly a: readonly string[],
    private readonly b: readonly string[],
  ) {
    const n = b.length;
    b.forEach((s, i) => {
      const list = this.b2j.get(s);
      if (list) list.push(i);
      else this.b2j.set(s, [i]);
    });
    // autojunk: in sequences of 200+ items, items making up more than 1% are "popular" and ignored.
    if (n >= 200) {
      const ntest = Math.floor(n / 100) + 1;
      for (const [s, idx] of [...this.b2j]) if (idx.length > ntest) this.b2j.delete(s);
    }
  }

  private findLongestMatch(alo: number, ahi: number, blo: number, bhi: number): [number, number, number] {
    let besti = alo;
    let bestj = blo;
    let bestsize = 0;
    let j2len = new Map<number, number>();
    for (let i = alo; i < ahi; i++) {
      const newj2len = new Map<number, number>();
      for (const j of this.b2j.get(this.a[i]!) ?? []) {
        if (j < blo) continue;
        if (j >= bhi) break;
        const k = (j2len.get(j - 1) ?? 0) + 1;
        newj2len.set(j, k);
        if (k > bestsize) {
          besti = i - k + 1;
          bestj = j - k + 1;
          bestsize = k;
        }
      }
      j2len = newj2len;
    }
    // Extend with equal neighbours (popular items are not in b2j, so the search above skipped them).
    while (besti > alo && bestj > blo && this.a[besti - 1] === this.b[bestj - 1]) {
      besti--;
      bestj--;
      bestsize++;
    }
    while (besti + bestsize < ahi && bestj + bestsize < bhi && this.a[besti + bestsize] === this.b[bestj + bestsize]) {
      bestsize++;
    }
    return [besti, bestj, bestsize];
  }

  matchingBlocks(): Array<[number, number, number]> {
    const queue: Array<[number, number, number, number]> = [[0, this.a.length, 0, this.b.length]];
    const blocks: Array<[number, number, number]> = [];
    while (queue.length) {
      const [alo, ahi, blo, bhi] = queue.pop()!;
      const [i, j, k] = this.findLongestMatch(alo, ahi, blo, bhi);
      if (k) {
        blocks.push([i, j, k]);
        if (alo < i && blo < j) queue.push([alo, i, blo, j]);
        if (i + k < ahi && j + k < bhi) queue.push([i + k, ahi, j + k, bhi]);
      }
    }
    blocks.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    const merged: Array<[number, number, number]> = [];
    let [i1, j1, k1] = [0, 0, 0];
    for (const [i2, j2, k2] of blocks) {
      if (i1 + k1 === i2 && j1 + k1 === j2) k1 += k2;
      else {
        if (k1) merged.push([i1, j1, k1]);
        [i1, j1, k1] = [i2, j2, k2];
      }
    }
    if (k1) merged.push([i1, j1, k1]);
    merged.push([this.a.length, this.b.length, 0]);
    return merged;
  }

  opcodes(): Opcode[] {
    let i = 0;
    let j = 0;
    const out: Opcode[] = [];
    for (const [ai, bj, size] of this.matchingBlocks()) {
      const tag = i < ai && j < bj ? 'replace' : i < ai ? 'delete' : j < bj ? 'insert' : undefined;
      if (tag) out.push([tag, i, ai, j, bj]);
      i = ai + size;
      j = bj + size;
      if (size) out.push(['equal', ai, i, bj, j]);
    }
    return out;
  }

  groupedOpcodes(n: number): Opcode[][] {
    let codes = this.opcodes();
    if (!codes.length) codes = [['equal', 0, 1, 0, 1]];
    if (codes[0]![0] === 'equal') {
      const [t, i1, i2, j1, j2] = codes[0]!;
      codes[0] = [t, Math.max(i1, i2 - n), i2, Math.max(j1, j2 - n), j2];
    }
    const last = codes.length - 1;
    if (codes[last]![0] === 'equal') {
      const [t, i1, i2, j1, j2] = codes[last]!;
      codes[last] = [t, i1, Math.min(i2, i1 + n), j1, Math.min(j2, j1 + n)];
    }
    const nn = n + n;
    const groups: Opcode[][] = [];
    let group: Opcode[] = [];
    for (const [t, i1, i2, j1, j2] of codes) {
      let [a1, b1] = [i1, j1];
      if (t === 'equal' && i2 - i1 > nn) {
        group.push([t, i1, Math.min(i2, i1 + n), j1, Math.min(j2, j1 + n)]);
        groups.push(group);
        group = [];
        a1 = Math.max(i1, i2 - n);
        b1 = Math.max(j1, j2 - n);
      }
      group.push([t, a1, i2, b1, j2]);
    }
    if (group.length && !(group.length === 1 && group[0]![0] === 'equal')) groups.push(group);
    return groups;
  }
}

/** go-difflib's SplitLines: split after newlines, the last line given one too. */
export function splitLines(s: string): string[] {
  const lines = s.split(/(?<=\n)/);
  lines[lines.length - 1] += '\n';
  return lines;
}

function rangeUnified(start: number, stop: number): string {
  const beginning = start + 1;
  const length = stop - start;
  if (length === 1) return `${beginning}`;
  if (length === 0) return `${beginning - 1},0`;
  return `${beginning},${length}`;
}

/** GetUnifiedDiffString: "" when the inputs are equal. */
export function unifiedDiff(a: readonly string[], b: readonly string[], fromFile: string, toFile: string, context: number): string {
  let out = '';
  let started = false;
  for (const group of new SequenceMatcher(a, b).groupedOpcodes(context)) {
    if (!started) {
      started = true;
      out += `--- ${fromFile}\n+++ ${toFile}\n`;
    }
    const first = group[0]!;
    const last = group[group.length - 1]!;
    out += `@@ -${rangeUnified(first[1], last[2])} +${rangeUnified(first[3], last[4])} @@\n`;
    for (const [tag, i1, i2, j1, j2] of group) {
      if (tag === 'equal') {
        for (const line of a.slice(i1, i2)) out += ' ' + line;
        continue;
      }
      if (tag === 'replace' || tag === 'delete') for (const line of a.slice(i1, i2)) out += '-' + line;
      if (tag === 'replace' || tag === 'insert') for (const line of b.slice(j1, j2)) out += '+' + line;
    }
  }
  return out;
}
