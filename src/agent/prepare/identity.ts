// The workload's certificate options (Istio's pilot-agent security options: CA address, credentials,
// mounted certificates, SDS socket), from the environment, the ProxyConfig and the node metadata.
import { CommandError } from '../../cli/context';
import type { ProxyConfig } from '../../config/proxyconfig';
import type { JsonObject } from '@bufbuild/protobuf';
import { identityOptions, IdentityOptionsError, type IdentityOptions } from '../identity/options';
import type { PrepareStep } from './inputs';

export function prepareWorkloadIdentity(s: PrepareStep, pc: ProxyConfig, metadata: JsonObject): IdentityOptions {
  const { env } = s;
  let workload: IdentityOptions;
  try {
    workload = identityOptions({ env, raw: s.ctx.env, proxyConfig: pc, clusterId: env.string('CLUSTER_ID'), metadata, cwd: s.cwd });
  } catch (e) {
    if (e instanceof IdentityOptionsError) throw new CommandError(e.message);
    throw e;
  }
  s.info.push(...workload.info);
  s.notes.push(...workload.warnings);
  return workload;
}
