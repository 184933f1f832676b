// The four programs of the multi-call binary. Each table is loaded only when its program runs.
import type { ProgramName, ProgramSpec } from '../../commands/types';

export const PROGRAMS: ReadonlyArray<{ name: ProgramName; word: string; istioName: string; short: string; load: () => Promise<ProgramSpec> }> = [
  {
    name: 'pilot-discovery',
    word: 'discovery',
    istioName: 'istiod',
    short: 'The discovery daemon: config, service registry, xDS server and CA',
    load: async () => (await import('../../commands/pilot-discovery')).pilotDiscovery,
  },
  {
    name: 'pilot-agent',
    word: 'agent',
    istioName: 'pilot-agent',
    short: 'The workload agent: bootstraps and supervises the data-plane proxy',
    load: async () => (await import('../../commands/pilot-agent')).pilotAgent,
  },
  {
    name: 'install-cni',
    word: 'cni',
    istioName: 'istio-cni',
    short: 'The node CNI plugin installer',
    load: async () => (await import('../../commands/install-cni')).installCni,
  },
  {
    name: 'meshctl',
    word: 'meshctl',
    istioName: 'istioctl',
    short: 'The operator command-line utility',
    load: async () => (await import('../../commands/meshctl')).meshctl,
  },
];

/**
 * Program chosen by the name the binary was invoked as (argv[0] basename through a symlink): ours, or
 * Istio's name for it (`istioctl`, `istiod`, `istio-cni`), which is how Istio users will link it.
 */
export function programByInvocation(basename: string) {
  const base = basename.replace(/\.(c?js|exe)$/, '');
  return PROGRAMS.find((p) => p.name === base || p.istioName === base);
}

/** Program chosen by the first word after `mesh` (`mesh discovery …`, `mesh pilot-discovery …`). */
export function programByWord(word: string | undefined) {
  return PROGRAMS.find((p) => p.word === word || p.name === word);
}
