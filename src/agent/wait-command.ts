// `pilot-agent wait`: polls the readiness URL until it answers 200 (Istio's app/wait.go). Every attempt waits
// --periodMillis first, each request gets --requestTimeoutMillis, and after --timeoutSeconds the command
// fails with the last error (exit 255, the program's error code).
import { CommandError, type Handler } from '../cli/context';
import { registerScope } from '../lib/log';
import { httpCall } from './http-client';

const log = registerScope('default');

/** One readiness attempt: undefined when ready, else what went wrong (Go's wording). */
export async function checkIfReady(url: string, timeoutMs: number): Promise<string | undefined> {
  try {
    const r = await httpCall(url, { timeoutMs });
    return r.status === 200 ? undefined : `HTTP status code ${r.status}`;
  } catch (e) {
    return (e as Error).message;
  }
}

export interface WaitOptions {
  url: string;
  periodMs: number;
  requestTimeoutMs: number;
  timeoutMs: number;
}

/** Resolves when ready; rejects with Istio's timeout message. */
export async function waitUntilReady(o: WaitOptions): Promise<void> {
  log.info(`Waiting for proxy to be ready (timeout: ${Math.round(o.timeoutMs / 1000)} seconds)...`);
  const deadline = Date.now() + o.timeoutMs;
  let lastError: string | undefined;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= o.periodMs) {
      // The timeout fires before the next attempt would start.
      await sleep(Math.max(0, left));
      throw new CommandError(`timeout waiting for proxy to become ready. Last error: ${lastError ?? '<nil>'}`);
    }
    await sleep(o.periodMs);
    lastError = await checkIfReady(o.url, Math.min(o.requestTimeoutMs, Math.max(1, deadline - Date.now())));
    if (lastError === undefined) {
      log.info('proxy is ready!');
      return;
    }
    log.debug(`Not ready yet: ${lastError}`);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export const run: Handler = async (ctx) => {
  await waitUntilReady({
    url: ctx.flags['url'] as string,
    periodMs: ctx.flags['periodMillis'] as number,
    requestTimeoutMs: ctx.flags['requestTimeoutMillis'] as number,
    timeoutMs: (ctx.flags['timeoutSeconds'] as number) * 1000,
  });
  return 0;
};
