// Routing set-up that the rules rely on, done with iproute2 inside the target namespace.

import type { CaptureRuleConfig } from './config';
import { PermissionError, XtablesError, looksLikePermissionProblem } from './errors';
import type { Dependencies } from './executor';

/** `ip` argument lists for the routes a configuration needs (pure). */
export function routeCommands(cfg: CaptureRuleConfig): string[][] {
  const cmds: string[][] = [];
  // The proxy's IPv6 passthrough source ::6 must be a local address: IPv6 loopback is ::1/128 only,
  // unlike IPv4 where all of 127/8 is local.
  if (cfg.enableIPv6) cmds.push(['-6', 'addr', 'add', '::6/128', 'dev', 'lo']);
  if (cfg.inboundPortsInclude !== '' && cfg.inboundInterceptionMode === 'TPROXY') {
    // Packets marked in MESH_DIVERT are routed to loopback, where the TPROXY socket picks them up.
    const families: Array<['-4' | '-6', string]> = [['-4', '0.0.0.0/0']];
    if (cfg.enableIPv6) families.push(['-6', '::/0']);
    for (const [flag] of families) {
      cmds.push([flag, 'rule', 'add', 'fwmark', cfg.inboundTProxyMark, 'lookup', cfg.inboundTProxyRouteTable]);
    }
    for (const [flag, all] of families) {
      cmds.push([flag, 'route', 'add', 'local', all, 'dev', 'lo', 'table', cfg.inboundTProxyRouteTable]);
    }
  }
  return cmds;
}

/** Applies the routes; entries that already exist are fine, so re-running is harmless. */
export async function configureRoutes(cfg: CaptureRuleConfig, deps: Dependencies): Promise<void> {
  for (const args of routeCommands(cfg)) {
    if (args[1] === 'rule') {
      // The kernel happily stores duplicate policy rules, so look before adding.
      const existing = await deps.run('ip', [args[0]!, 'rule', 'show', ...args.slice(3)]);
      if (existing.code === 0 && existing.stdout.trim() !== '') continue;
    }
    const r = await deps.run('ip', args);
    if (r.code === 0 || /file exists|already assigned/i.test(r.stderr)) continue;
    const command = `ip ${args.join(' ')}`;
    throw looksLikePermissionProblem(r.stderr) ? new PermissionError(command, r.stderr) : new XtablesError(command, r.stderr);
  }
}
