// How the data-plane proxy runs (Istio's envoy.args() inputs): a real Envoy when ProxyConfig.binaryPath or
// PATH has one, else this binary's built-in engine inside the agent's process.
import type { ProxyConfig } from '../../config/proxyconfig';
import { findProxyBinary, proxyArgs, type ProxyLaunch, type ProxyRun } from '../process';
import type { PrepareStep } from './inputs';
import type { PreparedProxyConfig } from './proxy-config';

export function prepareProxyLaunch(
  s: PrepareStep,
  o: { proxy: PreparedProxyConfig; configFile: string; ipv6: boolean; override: string | undefined },
): ProxyLaunch {
  const { env } = s;
  const pc: ProxyConfig = o.proxy.proxyConfig;
  const envoy = findProxyBinary(pc.binaryPath, s.ctx.env['PATH'], s.cwd);
  const enableCoreDump = env.bool('MESH_PROXY_ENABLE_CORE_DUMP');
  if (!envoy && enableCoreDump) s.notes.push('MESH_PROXY_ENABLE_CORE_DUMP has no effect on the built-in proxy engine (it is a Node.js process)');
  const run: ProxyRun = {
    configFile: o.configFile,
    drainDurationMs: pc.drainDuration,
    parentShutdownDurationMs: pc.parentShutdownDuration,
    ipv6: o.ipv6,
    logLevel: o.proxy.logLevel,
    componentLogLevel: o.proxy.componentLogLevel,
    concurrency: pc.concurrency,
    override: o.override,
    realEnvoy: envoy !== undefined,
    skipDeprecatedLogs: env.bool('PROXY_SKIP_DEPRECATED_LOGS'),
    enableCoreDump,
  };
  s.info.push(envoy ? `using Envoy at ${envoy}` : `no envoy executable (binaryPath ${pc.binaryPath}, PATH): using the built-in proxy engine`);
  return envoy ? { kind: 'exec', command: { file: envoy, args: proxyArgs(run) } } : { kind: 'builtin', run };
}
