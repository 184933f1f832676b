// The V8 heap settings `pilot-agent proxy` runs with, shared by the agent (src/agent/memory.ts, which restarts
// itself with them) and the boot loader (src/boot.ts, which then uses the chunks' code caches made under the
// same flags: V8 rejects a code cache made under other flags).
//
// V8's young generation (two semi-spaces) grows to 16 MB each under Node's defaults and stays there: about
// 30 MB of a proxy's ~107 MB. Capped at 4 MB, an idle gateway measured 85 MB and 95 MB at 1000 rps
// (scripts/bench/footprint.mjs), at ~8 % fewer saturated requests per core-second; 1–2 MB cost 12–30 %.

/** NODE_OPTIONS of the restarted agent (Node accepts this V8 flag there). */
export const AGENT_NODE_OPTIONS = '--max-semi-space-size=4';

/**
 * Set in the restarted agent's environment to the NODE_OPTIONS it had before (possibly empty), so that it
 * restores them for whatever it starts (an Envoy, probes) and does not restart again.
 */
export const RESTARTED_MARKER = 'MESH_AGENT_RESTARTED_NODE_OPTIONS';

/** Code caches made under AGENT_NODE_OPTIONS are built as `<chunk>.agent.cache`. */
export const AGENT_CACHE_SUFFIX = '.agent';

/** The code-cache variant for a process's NODE_OPTIONS: the agent's when they are exactly AGENT_NODE_OPTIONS. */
export function cacheVariant(nodeOptions: string | undefined): string {
  return nodeOptions?.trim() === AGENT_NODE_OPTIONS ? AGENT_CACHE_SUFFIX : '';
}
