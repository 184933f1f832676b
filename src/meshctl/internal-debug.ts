// `meshctl x internal-debug <debug-type>` (istioctl x internal-debug): any of the daemon's /debug pages,
// fetched over ADS (type istio.io/debug), printed as indented JSON when it is JSON.
import { CommandError, type Handler, type RunContext } from '../cli/context';
import { controlPlaneInfo, xdsOptions, xdsRequest } from './xds';

function indent2(body: string): string | undefined {
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return undefined;
  }
}

async function fetchDebug(ctx: RunContext, name: string): Promise<{ id: string; bodies: string[] }> {
  const res = await xdsRequest(xdsOptions(ctx), 'istio.io/debug', [name]);
  return { id: controlPlaneInfo(res).ID, bodies: res.resources.map((r) => Buffer.from(r.value).toString()) };
}

export const run: Handler = async (ctx) => {
  if (ctx.args.length === 0) throw new CommandError('debug type is required');
  const all = ctx.flags['all'] === true;
  let { id, bodies } = await fetchDebug(ctx, ctx.args[0]!);
  let prefix = '';
  for (const b of bodies) {
    if (b.includes('You must provide a proxyID in the query string')) {
      throw new CommandError(' You must provide a proxyID in the query string, e.g. [edsz?proxyID=mesh-ingressgateway]');
    }
    if (b.includes('404 page not found')) {
      ({ id, bodies } = await fetchDebug(ctx, 'list'));
      prefix = 'error: according to below command list, please check all supported internal debug commands\n';
      break;
    }
  }
  let out = prefix;
  if (all) {
    const mapped: Record<string, string> = {};
    for (const b of bodies) mapped[id] = b + '\n';
    out += JSON.stringify(mapped, null, 2) + '\n';
  } else {
    for (const b of bodies) out += (indent2(b) ?? b) + '\n';
  }
  ctx.stdout.write(out);
  return 0;
};
