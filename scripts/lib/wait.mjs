// The one polling helper of the tests and scripts (issue 25, item 6): thirteen `waitFor` and nine `until`
// copies with four argument orders became this. Plain JavaScript so that scripts, which node runs without a
// TypeScript step, share it with the tests (test/helpers/wait.ts re-exports it, types in wait.d.mts).

/** Thrown by a check to stop waiting at once (the thing waited for cannot happen any more). */
export class Exited extends Error {}

const describe = (what) => (typeof what === 'function' ? what() : what);

/**
 * Polls `check` every `intervalMs` until `accept` takes its result. A check that throws counts as "not yet"
 * (the thing polled is often a server still starting), except `Exited`; the last such error is named when
 * the deadline passes. Resolves with the result and the elapsed milliseconds.
 */
async function poll(what, check, accept, o = {}) {
  const timeoutMs = o.timeoutMs ?? 10_000;
  const intervalMs = o.intervalMs ?? 25;
  const start = Date.now();
  let last;
  for (;;) {
    try {
      const v = await check();
      if (accept(v)) return { value: v, elapsedMs: Date.now() - start };
    } catch (e) {
      if (e instanceof Exited) throw e;
      last = e;
    }
    if (Date.now() - start > timeoutMs) {
      const why = last === undefined ? '' : ` (last error: ${last instanceof Error ? last.message : String(last)})`;
      throw new Error(`timed out after ${timeoutMs} ms: ${describe(what)}${why}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Polls until `check` holds; resolves with the elapsed milliseconds. */
export async function waitFor(what, check, o) {
  return (await poll(what, check, (v) => Boolean(v), o)).elapsedMs;
}

/** Polls until `check` returns a value (not undefined, null or false) and resolves with that value. */
export async function waitForValue(what, check, o) {
  return (await poll(what, check, (v) => v !== undefined && v !== null && v !== false, o)).value;
}
