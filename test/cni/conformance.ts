// Reads ../shared/conformance/cni: cases.yaml and the files its cases name.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { SHARED } from '../helpers/spec';

export const CNI_CONFORMANCE = path.join(SHARED, 'conformance', 'cni');
export const INSTALL_DATA = path.join(CNI_CONFORMANCE, 'install');
export const PLUGIN_DATA = path.join(CNI_CONFORMANCE, 'plugin');

export const cases = YAML.parse(readFileSync(path.join(CNI_CONFORMANCE, 'cases.yaml'), 'utf8')) as Record<string, any>;

export const installFile = (name: string): string => readFileSync(path.join(INSTALL_DATA, name), 'utf8');
export const pluginGolden = (name: string): string => readFileSync(path.join(PLUGIN_DATA, name), 'utf8');

/**
 * Istio's getRules: split on COMMIT, drop the iptables-save lines, key each block by its `* <table>` line
 * (the block keeps its lines and gets COMMIT back).
 */
export function rulesByTable(text: string): Record<string, string> {
  const tables: Record<string, string> = {};
  for (const part of text.split('COMMIT')) {
    const lines = part
      .replace(/^\n+|\n+$/g, '')
      .split('\n')
      .filter((l) => l !== 'iptables-save' && l !== 'ip6tables-save');
    if (lines.length >= 1 && lines[0]!.startsWith('* ')) tables[lines[0]!.slice(2)] = [...lines, 'COMMIT'].join('\n');
  }
  return tables;
}

/**
 * The pod of a §11 cases.yaml name, or of its detect(name, message, code) form (an injected pod whose validation
 * init container crash-loops after exiting with that message and code), as annotations, labels and the
 * init container's status.
 */
export function repairPodCase(spec: string): any {
  const named = cases.repairPods[spec];
  const detect = /^detect\((\w+), "([^"]*)", (\d+)\)$/.exec(spec);
  if (named) return named;
  if (detect)
    return {
      annotations: { 'sidecar.mesh.io/status': 'something' },
      initContainerStatus: {
        name: 'mesh-validation',
        state: { waiting: { reason: 'CrashLoopBackOff', message: 'Back-off 5m0s restarting failed blah blah blah' } },
        lastState: { terminated: { message: detect[2], exitCode: Number(detect[3]) } },
      },
    };
  if (spec === 'badly-formatted') return { annotations: { 'sidecar.mesh.io/status': 'something' }, initContainerStatus: {} };
  throw new Error(`unknown pod ${spec}`);
}
