// What the agent's status server reports beyond the proxy's readiness: the application's own health
// (ProxyConfig.readinessProbe, reported to the discovery daemon for the WorkloadEntry, as Istio's
// pilot-agent health checker does), and notes on the status-side features this build does not have.
import { CommandError } from '../../cli/context';
import type { ProxyConfig } from '../../config/proxyconfig';
import { parseReadinessProbe, type ReadinessProbe } from '../health/probe';
import type { PrepareStep } from './inputs';
import type { NodeType } from '../config';
import { parseAppScrapeConfig, SCRAPE_ANNOTATION_VARS, type AppScrapeConfig } from '../metrics-merge';

/**
 * The application's metrics endpoint the status server merges (Istio's NewServer): sidecars only, since a
 * gateway's 15020 is reachable through its Service; a malformed value or the status port itself stops the start.
 */
export function prepareAppMetrics(s: PrepareStep, nodeType: NodeType, statusPort: number): AppScrapeConfig | undefined {
  if (nodeType !== 'sidecar') return undefined;
  const name = SCRAPE_ANNOTATION_VARS.find((n) => s.ctx.env[n] !== undefined);
  if (!name) return undefined;
  try {
    const cfg = parseAppScrapeConfig(name, s.ctx.env[name]!, statusPort);
    if (cfg) s.info.push(`application metrics merged into /stats/prometheus: localhost:${cfg.port}${cfg.path} (${name})`);
    return cfg;
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
}

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
