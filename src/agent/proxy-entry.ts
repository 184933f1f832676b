// `pilot-agent proxy`, first step: start making the workload key, then load the agent. Key generation runs in
// libuv's thread pool, so it overlaps the ~100 ms of loading the proxy command (gRPC, protobuf runtime) instead
// of following it — the agent's start → first certificate time is mostly those two.
import type { Handler } from '../cli/context';
import { EnvTable } from '../lib/env';
import { generateKeyPairAhead } from '../ca/pkix/keys';
import { workloadKeySpec } from './identity/key-spec';

export const run: Handler = async (ctx) => {
  const env = new EnvTable(ctx.program.env, ctx.env);
  if (!env.bool('FILE_MOUNTED_CERTS')) {
    try {
      void generateKeyPairAhead(workloadKeySpec(env));
    } catch {
      // A key Istio refuses: the agent's option parsing reports it with the setting's name.
    }
  }
  return (await import('./proxy-command')).run(ctx);
};
