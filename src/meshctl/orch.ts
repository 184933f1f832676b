// The orchestrator API as meshctl reaches it: --orchconfig (env ORCHCONFIG), else $KUBECONFIG, else
// ~/.kube/config, as istioctl's client loading does; --context picks a context of that file.
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CommandError, type RunContext } from '../cli/context';
import type { OrchClient } from '../config/orch/client';
import { describeOrchFailure } from './orch-errors';

/** The client configuration file meshctl would use, or undefined when none is given or present. */
export function orchConfigPath(ctx: RunContext): string | undefined {
  const flag = typeof ctx.flags['orchconfig'] === 'string' ? (ctx.flags['orchconfig'] as string) : '';
  if (flag) return flag;
  const env = ctx.env.KUBECONFIG?.split(path.delimiter).find((p) => p !== '');
  if (env) return env;
  const home = ctx.env.HOME || os.homedir();
  const file = path.join(home, '.kube', 'config');
  return existsSync(file) ? file : undefined;
}

/** A client for the cluster, or a CommandError saying why there is none. */
export async function meshctlOrchClient(ctx: RunContext, why: string, contextOverride?: string): Promise<OrchClient> {
  const file = orchConfigPath(ctx);
  if (!file) {
    throw new CommandError(`${why} needs the orchestrator API: no client configuration (give --orchconfig, or set ORCHCONFIG or KUBECONFIG)`);
  }
  const context = contextOverride ?? (typeof ctx.flags['context'] === 'string' ? (ctx.flags['context'] as string) : '');
  const { createOrchClient } = await import('../config/orch/client');
  let client: OrchClient;
  try {
    // JSON is what this client speaks; saying so keeps the daemon's protobuf notice out of meshctl's output.
    client = await createOrchClient({ orchconfig: file, context: context || undefined, userAgent: 'meshctl', contentType: 'json' });
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
  return withOneLineErrors(client, context ? `context "${context}" of ${file}` : file);
}

const RETRIES_429 = 10;

/**
 * Every request of every meshctl command passes here: a server that cannot be reached, refuses the
 * credentials or the permission becomes one line naming it (OrchAccessError, which keeps the status);
 * answers the caller handles (404, 409…) pass through unchanged.
 */
export function withOneLineErrors(client: OrchClient, origin: string): OrchClient {
  const mapped = async <T>(call: () => Promise<T>): Promise<T> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await call();
      } catch (e) {
        // client-go retries 429 (the server did not process the request: a CRD's storage still starting,
        // priority-and-fairness queues full) up to 10 times, a second apart without Retry-After.
        if (apiStatus(e) === 429 && attempt < RETRIES_429) {
          await new Promise((r) => setTimeout(r, 1000));
          continue;
        }
        throw describeOrchFailure(client.server, origin, e) ?? e;
      }
    }
  };
  return {
    ...client,
    getJson: (p, query, signal) => mapped(() => client.getJson(p, query, signal)),
    request: (method, p, opts) => mapped(() => client.request(method, p, opts)),
  };
}

/** An API answer's status code, or undefined for a failure that never reached the server. */
export function apiStatus(e: unknown): number | undefined {
  const code = (e as { statusCode?: unknown }).statusCode;
  return typeof code === 'number' ? code : undefined;
}

/** client-go's text for a failed Get: `configmaps "mesh" not found` on 404, the server's answer otherwise. */
export function getErrorText(e: unknown, resource: string, name: string): string {
  if (apiStatus(e) === 404) return `${resource} "${name}" not found`;
  return (e as Error).message;
}

/** GET of one object, undefined on 404. */
export async function findObject(client: OrchClient, p: string): Promise<Record<string, any> | undefined> {
  try {
    return (await client.getJson(p)) as Record<string, any>;
  } catch (e) {
    if (apiStatus(e) === 404) return undefined;
    throw e;
  }
}

/** The namespace of the client configuration's current context (kubectl's default namespace), or ''. */
export function contextNamespace(client: OrchClient): string {
  const kc = client.kubeConfig;
  return kc.getContextObject(kc.getCurrentContext())?.namespace ?? '';
}

/**
 * Runs `fn` with a client for the cluster, closed afterwards. The client's requests already fail as one
 * line naming the server (withOneLineErrors); anything else that escapes is put in the same words.
 */
export async function withOrch<T>(ctx: RunContext, why: string, fn: (client: OrchClient) => Promise<T>): Promise<T> {
  const client = await meshctlOrchClient(ctx, why);
  try {
    return await fn(client);
  } catch (e) {
    throw describeOrchFailure(client.server, why, e) ?? e;
  } finally {
    client.close();
  }
}

/** The namespace a command acts in: --namespace, else the client configuration context's, else `default`. */
export function commandNamespace(ctx: RunContext, client: OrchClient): string {
  const flag = typeof ctx.flags['namespace'] === 'string' ? (ctx.flags['namespace'] as string) : '';
  return flag || contextNamespace(client) || 'default';
}
