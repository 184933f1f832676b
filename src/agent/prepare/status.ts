// What the agent's status server reports beyond the proxy's readiness: the application's own health
// (ProxyConfig.readinessProbe, reported to the discovery daemon for the WorkloadEntry, as Istio's
// pilot-agent health checker does), and notes on the status-side features this build does not have.
import { CommandError } from '../../cli/context';
import type { ProxyConfig } from '../../config/proxyconfig';
import { parseReadinessProbe, type ReadinessProbe } from '../health/probe';
import type { PrepareStep } from './inputs';

export function prepareHealthProbe(s: PrepareStep, pc: ProxyConfig, stsPort: number): ReadinessProbe | undefined {
  if (stsPort > 0) s.notes.push(`--stsPort ${stsPort}: the security token service is not part of this build; no STS server is started`);
  if (s.env.string('MESH_ORCH_APP_PROBERS'))
    s.notes.push('MESH_ORCH_APP_PROBERS: application probe rewriting is not part of this build; /app-health/ answers 400');
  let probe: ReadinessProbe | undefined;
  try {
    probe = parseReadinessProbe(pc.other['readinessProbe'], 'proxy config readinessProbe');
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
  if (probe) s.info.push(`application health check (readinessProbe ${probe.method.kind}): reported to the discovery daemon for the WorkloadEntry`);
  return probe;
}
