// `meshctl x proxy-stats` (istioctl x envoy-stats): a live proxy's stats from its admin interface
// (server stats or per-cluster stats; short, json, yaml, prom), or with prom-merged the agent's merged
// Prometheus endpoint on the status port (proxy and application metrics together).
import { CommandError, type Handler, type RunContext } from '../cli/context';
import { jsonToGoYaml } from '../lib/goyaml';
import { proxyDo, resolveProxy, type ProxyTarget } from './target';

async function stats(t: ProxyTarget, type: string, output: string): Promise<string> {
  if (type === '' || type === 'server') {
    switch (output) {
      case '':
      case 'short':
        return proxyDo(t, 'GET', 'stats');
      case 'json':
      case 'yaml':
        return proxyDo(t, 'GET', 'stats?format=json');
      case 'prom':
        return proxyDo(t, 'GET', 'stats/prometheus');
      case 'prom-merged':
        return proxyDo(t, 'GET', 'stats/prometheus', t.statusPort);
      default:
        throw new CommandError(
          `unable to match a printer suitable for the output format ${output}, allowed formats are: json,yaml,short,prom,prom-merged`,
        );
    }
  }
  if (type === 'cluster' || type === 'clusters') {
    switch (output) {
      case '':
      case 'short':
        return proxyDo(t, 'GET', 'clusters');
      case 'json':
      case 'yaml':
        return proxyDo(t, 'GET', 'clusters?format=json');
      default:
        throw new CommandError(`unable to match a printer suitable for the output format ${output}, allowed formats are: json,yaml,short`);
    }
  }
  throw new CommandError(`unknown stats type ${type}`);
}

function render(body: string, output: string): string {
  if (output === 'yaml' || output === 'json') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch (e) {
      throw new CommandError(`${output === 'yaml' ? 'error converting JSON to YAML' : 'invalid JSON from the proxy'}: ${(e as Error).message}`);
    }
    return output === 'yaml' ? jsonToGoYaml(parsed) : JSON.stringify(parsed, null, 4) + '\n';
  }
  return body;
}

export const run: Handler = async (ctx: RunContext) => {
  const selector = (ctx.flags['selector'] as string | undefined) ?? '';
  if (ctx.args.length !== 1 && selector === '') throw new CommandError('stats requires pod name or label selector');
  if (ctx.args.length === 1 && selector !== '') throw new CommandError('name cannot be provided when the label selector is specified');
  if (selector) throw new CommandError('--selector needs the orchestrator API to list pods, which this command does not use yet: name the pod');
  const output = (ctx.flags['output'] as string | undefined) ?? 'short';
  const type = (ctx.flags['type'] as string | undefined) ?? 'server';
  const t = await resolveProxy(ctx, ctx.args[0]!);
  const body = await stats(t, type, output);
  ctx.stdout.write(`\nThe result of pod ${t.name}:\n\n${render(body, output)}`);
  return 0;
};
