// The connection to the discovery daemon (Istio's pilot-agent options for the xDS upstream: address, TLS,
// SAN, keepalive) under the compliance policy the agent runs with.
import { CommandError } from '../../cli/context';
import type { ProxyConfig } from '../../config/proxyconfig';
import { CompliancePolicyError, parseCompliancePolicy, type CompliancePolicy } from '../../lib/compliance';
import { discoveryConnection, DiscoveryConnectionError, type DiscoveryConnection } from '../discovery-connection';
import type { PrepareStep } from './inputs';

export interface PreparedDiscovery {
  compliance: CompliancePolicy;
  connection: DiscoveryConnection;
}

export function prepareDiscovery(s: PrepareStep, pc: ProxyConfig): PreparedDiscovery {
  const { env } = s;
  let compliance: CompliancePolicy;
  try {
    compliance = parseCompliancePolicy(env.string('COMPLIANCE_POLICY'));
  } catch (e) {
    if (e instanceof CompliancePolicyError) throw new CommandError(e.message);
    throw e;
  }
  let connection: DiscoveryConnection;
  try {
    connection = discoveryConnection({
      compliance,
      proxyConfig: pc,
      xdsRootCa: env.string('XDS_ROOT_CA'),
      meshdSan: env.string('MESHD_SAN'),
      clusterId: env.string('CLUSTER_ID'),
      cwd: s.cwd,
      keepaliveTimeMs: env.duration('GRPC_KEEPALIVE_INTERVAL'),
      keepaliveTimeoutMs: env.duration('GRPC_KEEPALIVE_TIMEOUT'),
    });
  } catch (e) {
    if (e instanceof DiscoveryConnectionError) throw new CommandError(e.message);
    throw e;
  }
  s.info.push(...connection.info);
  s.notes.push(...connection.warnings);
  return { compliance, connection };
}
