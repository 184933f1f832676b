// One line for an orchestrator API failure (issue 28 item 10): which address, and what went wrong — refused
// connection, unknown host, TLS, refused credentials (401), missing permission (403) — instead of Node's
// `TypeError: fetch failed` and its stack. client-go's errors name the server the same way
// (`Get "https://…": dial tcp …: connect: connection refused`); the words here are ours.
import { CommandError, type RunContext } from '../cli/context';
import type { OrchClient } from '../config/orch/client';
import { apiStatus, meshctlOrchClient } from './orch';

const NET_TEXT: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by the server',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'the host name could not be resolved (temporary failure)',
  ETIMEDOUT: 'connection timed out',
  UND_ERR_CONNECT_TIMEOUT: 'connection timed out',
  EHOSTUNREACH: 'no route to host',
  ENETUNREACH: 'network is unreachable',
  UND_ERR_SOCKET: 'the connection closed unexpectedly',
};

/** The innermost error of a `cause` chain that carries a `code` (undici wraps the socket's error), else the innermost message. */
function rootCause(e: unknown): { code?: string; message: string } {
  let cur = e as { code?: unknown; message?: string; cause?: unknown } | undefined;
  let found: { code?: string; message: string } = { message: (e as Error)?.message ?? String(e) };
  let deepest = found.message;
  for (let depth = 0; cur && depth < 8; depth++) {
    if (typeof cur.code === 'string') found = { code: cur.code, message: cur.message ?? found.message };
    if (cur.message) deepest = cur.message;
    cur = cur.cause as typeof cur;
  }
  // undici's `fetch failed` says nothing; its cause (`bad port`, a socket error) does.
  return found.code ? found : { message: deepest };
}

/** The one-line text for a failed call to the API server at `server`. */
export function orchErrorText(e: unknown, server: string): string {
  const status = apiStatus(e);
  const message = (e as Error)?.message ?? String(e);
  if (status === 401) return `the orchestrator API at ${server} refused the credentials (401 Unauthorized)`;
  if (status === 403) {
    const detail = message.replace(/^\w+ \S+: 403 Forbidden: /, '');
    return `the orchestrator API at ${server} denied the permission (403 Forbidden): ${detail}`;
  }
  if (status !== undefined) return message;
  const cause = rootCause(e);
  if (cause.code && NET_TEXT[cause.code]) return `cannot reach the orchestrator API at ${server}: ${NET_TEXT[cause.code]}`;
  if (cause.code && /CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_OSSL/.test(cause.code)) {
    return `TLS with the orchestrator API at ${server} failed: ${cause.message}`;
  }
  return `cannot reach the orchestrator API at ${server}: ${cause.message}`;
}

/**
 * Runs `fn` with a client for the cluster, closed afterwards; any failure that is not already a CommandError
 * becomes one line naming the server.
 */
export async function withOrch<T>(ctx: RunContext, why: string, fn: (client: OrchClient) => Promise<T>): Promise<T> {
  const client = await meshctlOrchClient(ctx, why);
  try {
    return await fn(client);
  } catch (e) {
    if (e instanceof CommandError) throw e;
    throw new CommandError(orchErrorText(e, client.server));
  } finally {
    client.close();
  }
}

/** The namespace a command acts in: --namespace, else the client configuration context's, else `default`. */
export function contextNamespace(ctx: RunContext, client: OrchClient): string {
  const flag = typeof ctx.flags['namespace'] === 'string' ? (ctx.flags['namespace'] as string) : '';
  if (flag) return flag;
  const kc = client.kubeConfig;
  return kc.getContextObject(kc.getCurrentContext())?.namespace || 'default';
}
