export interface WaitOptions {
  /** Fails after this many milliseconds (default 10 000). */
  timeoutMs?: number;
  /** Pause between two checks (default 25). */
  intervalMs?: number;
}
export type What = string | (() => string);
export class Exited extends Error {}
export function waitFor(what: What, check: () => boolean | Promise<boolean>, o?: WaitOptions): Promise<number>;
export function waitForValue<T>(
  what: What,
  check: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  o?: WaitOptions,
): Promise<T>;
