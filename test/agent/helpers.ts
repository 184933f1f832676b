// The agent tests' proxy: the ingress gateway pod gw-0 in mesh-system, as pilot-agent's initProxy and
// bootstrap.GetNodeMetaData see it (node ID router~<ip>~gw-0.mesh-system~, default ports 15021 and 15090).
import type { ProxyConfig } from '../../src/config/proxyconfig';
import { proxyIdentity, type NodeMetadataInputs } from '../../src/agent/node';

/** The node metadata inputs of gw-0 at `instanceIp` (with `machineIps`); `env` adds to its pod variables. */
export function gatewayNodeInputs(
  o: { proxyConfig: ProxyConfig; instanceIp: string; machineIps: string[]; env?: Record<string, string> },
  over: Partial<NodeMetadataInputs> = {},
): NodeMetadataInputs {
  return {
    env: { POD_NAME: 'gw-0', POD_NAMESPACE: 'mesh-system', ...o.env },
    proxyConfig: o.proxyConfig,
    identity: proxyIdentity({
      type: 'router',
      podName: 'gw-0',
      podNamespace: 'mesh-system',
      instanceIp: o.instanceIp,
      domain: '',
      machineIps: o.machineIps,
    }),
    meshVersion: '1.26.0',
    envoyStatusPort: 15021,
    envoyPrometheusPort: 15090,
    exitOnZeroActiveConnections: false,
    stsPort: 0,
    outlierLogPath: '',
    ...over,
  };
}
