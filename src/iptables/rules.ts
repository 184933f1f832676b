// The rule model: an ordered list of -A/-I rules per IP family, and the pure translations of such a
// list into iptables-restore input, into `iptables -C` checks and into `iptables -D` undo commands.

import { BUILTIN_CHAINS, CHAIN_PREFIX, type Table } from './constants';

export interface Rule {
  readonly table: Table;
  readonly chain: string;
  /** Full rule spec including the operation: ['-A', chain, ...] or ['-I', chain, '1', ...]. */
  readonly params: readonly string[];
}

export interface FamilyRules {
  readonly v4: readonly Rule[];
  readonly v6: readonly Rule[];
}

/** Marks the argument an address-family-specific value replaces in a versioned rule. */
export const VERSIONED = Symbol('ip-version-specific');
export type VersionedArg = string | typeof VERSIONED;

/**
 * Accumulates rules in call order. IPv6 rules are kept only when IPv6 is enabled, so a v4-only
 * configuration yields an empty IPv6 restore (and ip6tables is left alone).
 */
export class RuleSet {
  private readonly v4: Rule[] = [];
  private readonly v6: Rule[] = [];

  constructor(private readonly enableIPv6: boolean) {}

  appendV4(table: Table, chain: string, ...params: string[]): void {
    this.v4.push({ table, chain, params: ['-A', chain, ...params] });
  }
  appendV6(table: Table, chain: string, ...params: string[]): void {
    if (this.enableIPv6) this.v6.push({ table, chain, params: ['-A', chain, ...params] });
  }
  append(table: Table, chain: string, ...params: string[]): void {
    this.appendV4(table, chain, ...params);
    this.appendV6(table, chain, ...params);
  }
  /** One rule for both families that differs only in an address (`VERSIONED` marks where). */
  appendVersioned(v4: string, v6: string, table: Table, chain: string, ...params: VersionedArg[]): void {
    this.appendV4(table, chain, ...params.map((p) => (p === VERSIONED ? v4 : p)));
    this.appendV6(table, chain, ...params.map((p) => (p === VERSIONED ? v6 : p)));
  }
  insertV4(table: Table, chain: string, position: number, ...params: string[]): void {
    this.v4.push({ table, chain, params: ['-I', chain, String(position), ...params] });
  }
  insertV6(table: Table, chain: string, position: number, ...params: string[]): void {
    if (this.enableIPv6) this.v6.push({ table, chain, params: ['-I', chain, String(position), ...params] });
  }
  insert(table: Table, chain: string, position: number, ...params: string[]): void {
    this.insertV4(table, chain, position, ...params);
    this.insertV6(table, chain, position, ...params);
  }

  rules(): FamilyRules {
    return { v4: [...this.v4], v6: [...this.v6] };
  }
}

export const isOwnChain = (chain: string): boolean => chain.startsWith(CHAIN_PREFIX);

/** The chain a rule jumps to, when its spec ends in `-j <chain>` (targets with options excluded). */
function jumpTarget(params: readonly string[]): string | undefined {
  return params.length >= 2 && params[params.length - 2] === '-j' ? params[params.length - 1] : undefined;
}

/** Chains to create (-N), per table, in first-use order: chains holding rules, then mere jump targets. */
export function chainsToCreate(rules: readonly Rule[]): Map<Table, string[]> {
  const seen = new Set<string>();
  const out = new Map<Table, string[]>();
  const add = (table: Table, chain: string) => {
    const key = `${chain}:${table}`;
    if (seen.has(key)) return;
    seen.add(key);
    if (BUILTIN_CHAINS.has(chain)) return;
    out.set(table, [...(out.get(table) ?? []), chain]);
  };
  for (const r of rules) add(r.table, r.chain);
  // A jumped-to chain of ours may have no rules of its own; it must still exist or the restore
  // fails. Other targets (RETURN, DROP, ACCEPT) are not chains to create.
  for (const r of rules) {
    const target = jumpTarget(r.params);
    if (target !== undefined && isOwnChain(target)) add(r.table, target);
  }
  return out;
}

/**
 * iptables-restore input for `--noflush`: tables in alphabetical order, each with its -N lines,
 * then its rules in call order, then COMMIT. Tables without rules are left out.
 */
export function toRestoreText(rules: readonly Rule[]): string {
  const byTable = new Map<Table, string[]>();
  for (const [table, chains] of chainsToCreate(rules))
    byTable.set(
      table,
      chains.map((c) => `-N ${c}`),
    );
  for (const r of rules) byTable.set(r.table, [...(byTable.get(r.table) ?? []), r.params.join(' ')]);
  let text = '';
  for (const table of [...byTable.keys()].sort()) {
    const lines = byTable.get(table)!;
    if (lines.length === 0) continue;
    text += `* ${table}\n${lines.join('\n')}\n` + 'COMMIT\n';
  }
  return text;
}

/** Rewrites a rule's -A/-I (dropping the -I position) into another operation such as -C or -D. */
function withOperation(r: Rule, op: '-C' | '-D'): string[] {
  const [verb, chain, ...rest] = r.params;
  const spec = verb === '-I' ? rest.slice(1) : rest;
  return ['-t', r.table, op, chain!, ...spec];
}

/** `iptables` argument lists that succeed only if each rule is present. */
export function checkCommands(rules: readonly Rule[]): string[][] {
  return rules.map((r) => withOperation(r, '-C'));
}

/**
 * `iptables` argument lists removing the rules we put into chains that are not ours (built-in
 * chains), newest first. Rules inside MESH_ chains go away when those chains are flushed.
 */
export function undoCommands(rules: readonly Rule[]): string[][] {
  return [...rules]
    .reverse()
    .filter((r) => !isOwnChain(r.chain))
    .map((r) => withOperation(r, '-D'));
}

/**
 * Temporary DROP rules that keep traffic from bypassing the proxy while our chains are being replaced
 * during a reconcile.
 */
export function guardrailRules(): Rule[] {
  const rules: Rule[] = [];
  for (const chain of ['INPUT', 'FORWARD', 'OUTPUT']) {
    for (const proto of ['tcp', 'udp']) {
      rules.push({ table: 'filter', chain, params: ['-I', chain, '1', '-p', proto, '-j', 'DROP'] });
    }
  }
  return rules;
}
