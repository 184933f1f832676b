// Reading the facts the configuration depends on: resolvers, accounts and the pod's addresses.
// Parsers are pure; the readers at the bottom do the I/O.

import { readFile } from 'node:fs/promises';
import os from 'node:os';
import { pickHostAddress, type CaptureFacts } from './config';
import { PermissionError, XtablesError, looksLikePermissionProblem } from './errors';
import type { Dependencies } from './executor';
import { parseResolvConf as parseResolv } from '../dns/resolv-conf';

/** `nameserver` entries of a resolv.conf, in order. */
export function parseResolvConf(text: string): string[] {
  return parseResolv(text).servers;
}

/** Account name → UID from /etc/passwd text. */
export function parsePasswd(text: string): Record<string, string> {
  const users: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const [name, , uid] = line.split(':');
    if (name && uid && /^[0-9]+$/.test(uid) && !(name in users)) users[name] = uid;
  }
  return users;
}

/** Addresses from `ip -o addr show` output, in interface order. */
export function parseIpAddrShow(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const m = /\sinet6?\s+([^\s/]+)/.exec(line);
    if (m) out.push(m[1]!);
  }
  return out;
}

export interface FactSources {
  readonly resolvConfPath?: string;
  readonly passwdPath?: string;
}

/**
 * Reads the facts. With a network namespace the addresses come from inside it (via `ip`), since the
 * pod's address family is what decides whether IPv6 rules are needed.
 */
export async function gatherFacts(networkNamespace: string, deps: Dependencies, sources: FactSources = {}): Promise<CaptureFacts> {
  const resolvConf = sources.resolvConfPath ?? '/etc/resolv.conf';
  let nameservers: CaptureFacts['nameservers'];
  try {
    nameservers = parseResolvConf(await readFile(resolvConf, 'utf8'));
  } catch (err) {
    nameservers = { error: (err as Error).message };
  }

  let users: Record<string, string> = {};
  try {
    users = parsePasswd(await readFile(sources.passwdPath ?? '/etc/passwd', 'utf8'));
  } catch {
    // Without /etc/passwd the proxy UID falls back to its well-known default.
  }

  let localAddresses: string[];
  if (networkNamespace === '') {
    localAddresses = Object.values(os.networkInterfaces()).flatMap((list) => (list ?? []).map((a) => a.address));
    // os.networkInterfaces() (libuv) leaves out interfaces that are not up and running, as a veth is for a moment
    // after both its ends were set up; Istio reads every address (Go's net.InterfaceAddrs). Without a usable one,
    // `ip` lists them all, where it is installed.
    if (!pickHostAddress(localAddresses, false)) localAddresses = [...localAddresses, ...(await ipAddresses(deps, '').catch(() => []))];
  } else {
    localAddresses = await ipAddresses(deps, networkNamespace);
  }
  return { nameservers, users, localAddresses };
}

/** Every address `ip -o addr show` lists (run inside the namespace given, if any). */
async function ipAddresses(deps: Dependencies, networkNamespace: string): Promise<string[]> {
  const r = await deps.run('ip', ['-o', 'addr', 'show']);
  if (r.code !== 0) {
    const command = `ip -o addr show${networkNamespace ? ` (in network namespace ${networkNamespace})` : ''}`;
    throw looksLikePermissionProblem(r.stderr) ? new PermissionError(command, r.stderr) : new XtablesError(command, r.stderr);
  }
  return parseIpAddrShow(r.stdout);
}
