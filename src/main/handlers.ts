// Behaviour behind each `run` key of the tables (commands/), loaded only when that command runs so that
// `--help` and `version` start fast. The composition root: the one place that imports the behaviours; the CLI
// engine (src/cli/run.ts) is handed `loadHandler` and never imports them.
import { CommandError, type Handler, type HandlerLoader } from '../cli/context';
import { commandPath } from '../cli/tree';

type Loader = () => Promise<{ run: Handler }>;

const LOADERS: Readonly<Record<string, Loader>> = {
  version: () => import('./version'),
  completion: () => import('../cli/completion-command'),
  'agent.mesh-iptables': () => import('../iptables/command'),
  'discovery.request': () => import('../meshd/request-command'),
  'agent.proxy': () => import('../agent/proxy-entry'),
  'agent.wait': () => import('../agent/wait-command'),
  'agent.request': () => import('../agent/request-command'),
  'agent.envoy': () => import('../proxy/command'),
  'discovery.discovery': () => import('../meshd/discovery-command'),
  'meshctl.orch-inject': () => import('../meshctl/orch-inject'),
  'meshctl.proxy-status': () => import('../meshctl/status'),
  'meshctl.experimental.proxy-status': () => import('../meshctl/status'),
  'meshctl.experimental.version': () => import('../meshctl/version'),
  'meshctl.experimental.internal-debug': () => import('../meshctl/internal-debug'),
  'meshctl.experimental.proxy-stats': () => import('../meshctl/proxy-stats'),
  'meshctl.experimental.metrics': () => import('../meshctl/metrics'),
  'meshctl.dashboard.metrics-ui': async () => ({ run: (await import('../meshctl/dashboard')).metricsUi }),
  'meshctl.dashboard.controlz': async () => ({ run: (await import('../meshctl/dashboard')).controlz }),
  'meshctl.dashboard.meshd-debug': async () => ({ run: (await import('../meshctl/dashboard')).meshdDebug }),
  'meshctl.dashboard.proxy': async () => ({ run: (await import('../meshctl/dashboard')).proxy }),
  'meshctl.dashboard.proxy-legacy': async () => ({ run: (await import('../meshctl/dashboard')).proxyLegacy }),
  'meshctl.dashboard.graphs': async () => ({ run: (await import('../meshctl/dashboard')).graphs }),
  'meshctl.dashboard.topology-ui': async () => ({ run: (await import('../meshctl/dashboard')).topologyUi }),
  'meshctl.dashboard.trace-ui-a': async () => ({ run: (await import('../meshctl/dashboard')).traceUiA }),
  'meshctl.dashboard.trace-ui-b': async () => ({ run: (await import('../meshctl/dashboard')).traceUiB }),
  'meshctl.dashboard.trace-ui-c': async () => ({ run: (await import('../meshctl/dashboard')).traceUiC }),
  'meshctl.nodeproxy-config.all': async () => ({ run: (await import('../meshctl/nodeproxy/command')).all }),
  'meshctl.nodeproxy-config.certificate': async () => ({ run: (await import('../meshctl/nodeproxy/command')).certificate }),
  'meshctl.nodeproxy-config.connections': async () => ({ run: (await import('../meshctl/nodeproxy/command')).connections }),
  'meshctl.nodeproxy-config.log': async () => ({ run: (await import('../meshctl/nodeproxy/command')).log }),
  'meshctl.nodeproxy-config.policy': async () => ({ run: (await import('../meshctl/nodeproxy/command')).policy }),
  'meshctl.nodeproxy-config.service': async () => ({ run: (await import('../meshctl/nodeproxy/command')).service }),
  'meshctl.nodeproxy-config.workload': async () => ({ run: (await import('../meshctl/nodeproxy/command')).workload }),
  'meshctl.proxy-config.all': async () => ({ run: (await import('../meshctl/proxyconfig/command')).all }),
  'meshctl.proxy-config.bootstrap': async () => ({ run: (await import('../meshctl/proxyconfig/command')).bootstrap }),
  'meshctl.proxy-config.cluster': async () => ({ run: (await import('../meshctl/proxyconfig/command')).cluster }),
  'meshctl.proxy-config.ecds': async () => ({ run: (await import('../meshctl/proxyconfig/command')).ecds }),
  'meshctl.proxy-config.endpoint': async () => ({ run: (await import('../meshctl/proxyconfig/command')).endpoint }),
  'meshctl.proxy-config.listener': async () => ({ run: (await import('../meshctl/proxyconfig/command')).listener }),
  'meshctl.proxy-config.log': async () => ({ run: (await import('../meshctl/proxyconfig/command')).log }),
  'meshctl.proxy-config.rootca-compare': async () => ({ run: (await import('../meshctl/proxyconfig/command')).rootcaCompare }),
  'meshctl.proxy-config.route': async () => ({ run: (await import('../meshctl/proxyconfig/command')).route }),
  'meshctl.proxy-config.secret': async () => ({ run: (await import('../meshctl/proxyconfig/command')).secret }),
  'cni.install': () => import('../cni/install/command'),
  'meshctl.validate': () => import('../meshctl/validate'),
  'meshctl.analyze': () => import('../meshctl/analyze/command'),
  'meshctl.admin.log': () => import('../meshctl/admin-log'),
  'meshctl.experimental.authz.check': async () => ({ run: (await import('../meshctl/authz')).check }),
  'meshctl.authz': async () => ({ run: (await import('../meshctl/authz')).pointer }),
  'meshctl.experimental.precheck': () => import('../meshctl/precheck'),
  'meshctl.experimental.ca.client-cert': async () => ({ run: (await import('../meshctl/ca')).clientCert }),
  'meshctl.experimental.workload.group.create': async () => ({ run: (await import('../meshctl/workload')).groupCreate }),
  'meshctl.bug-report': () => import('../meshctl/bugreport/command'),
  'meshctl.waypoint.generate': async () => ({ run: (await import('../meshctl/waypoint')).generate }),
  'meshctl.tag.generate': async () => ({ run: (await import('../meshctl/tag')).generate }),
  'meshctl.tag.set': async () => ({ run: (await import('../meshctl/tag-manage')).set }),
  'meshctl.tag.list': async () => ({ run: (await import('../meshctl/tag-manage')).listTags }),
  'meshctl.tag.remove': async () => ({ run: (await import('../meshctl/tag-manage')).remove }),
  'meshctl.waypoint.apply': async () => ({ run: (await import('../meshctl/waypoint-manage')).apply }),
  'meshctl.waypoint.list': async () => ({ run: (await import('../meshctl/waypoint-manage')).list }),
  'meshctl.waypoint.status': async () => ({ run: (await import('../meshctl/waypoint-manage')).status }),
  'meshctl.waypoint.delete': async () => ({ run: (await import('../meshctl/waypoint-manage')).remove }),
  'meshctl.experimental.injector.list': () => import('../meshctl/injector'),
  'meshctl.options': () => import('../meshctl/options'),
  'meshctl.bug-report.version': () => import('./version'),
  'meshctl.manifest.generate': async () => ({ run: (await import('../manifest/command')).generateCommand }),
  'meshctl.manifest.translate': async () => ({ run: (await import('../manifest/command')).translateCommand }),
  'meshctl.manifest.install': async () => ({ run: (await import('../manifest/command')).installCommand }),
  'meshctl.install': async () => ({ run: (await import('../manifest/command')).installCommand }),
  'meshctl.upgrade': async () => ({ run: (await import('../manifest/command')).installCommand }),
  'meshctl.uninstall': async () => ({ run: (await import('../manifest/command')).uninstallCommand }),
  'meshctl.create-remote-secret': async () => {
    const [{ createRemoteSecretCommand }, { readerAccountObjects }] = await Promise.all([
      import('../meshctl/remote-secret'),
      import('../manifest/reader-account'),
    ]);
    return { run: createRemoteSecretCommand({ readerObjects: readerAccountObjects }) };
  },
  'meshctl.remote-clusters': () => import('../meshctl/remote-clusters'),
  'meshctl.experimental.workload.entry.configure': async () => ({ run: (await import('../meshctl/workload')).entryConfigure }),
};

/** A command whose behaviour is not in this build: its flags were parsed, but it must not pretend to run. */
const notAvailable: Handler = async (ctx) => {
  throw new CommandError(
    `"${commandPath(ctx.program, [ctx.program.root, ...pathSpecs(ctx)])}" is not available in this build of mesh yet: ` +
      `its arguments and flags were parsed and validated, but it has no behaviour to run`,
  );
};

function pathSpecs(ctx: Parameters<Handler>[0]) {
  let node = ctx.program.root;
  const out = [];
  for (const word of ctx.path) {
    const next = node.subcommands?.find((s) => s.name === word);
    if (!next) break;
    out.push(next);
    node = next;
  }
  return out;
}

export const loadHandler: HandlerLoader = async (key) => {
  const loader = LOADERS[key];
  return loader ? (await loader()).run : notAvailable;
};
