// `meshctl x version` (and `meshctl version --remote` when a control plane address is configured): the
// client's build, the daemon's from the control_plane identifier of a syncz answer, and the proxies' versions
// from the same answer, in the shapes of Istio's version command.
import type { JsonValue } from '@bufbuild/protobuf';
import { CommandError, type Handler, type RunContext } from '../cli/context';
import { buildInfo, longForm, type BuildInfo } from '../lib/buildinfo';
import { jsonToGoYaml } from '../lib/goyaml';
import { validateXdsOptions, xdsOptions } from './xds-options';

interface ServerInfo {
  Component: string;
  Revision: string;
  Info: Partial<BuildInfo>;
}

interface ProxyInfo {
  ID: string;
  MeshVersion: string;
}

async function remote(ctx: RunContext): Promise<{ mesh: ServerInfo[]; proxies: ProxyInfo[] }> {
  const options = xdsOptions(ctx);
  // No daemon configured is the common case of `meshctl version`: say so before loading gRPC and the xDS types.
  validateXdsOptions(options);
  const [{ controlPlaneInfo, xdsRequest }, { anyUnpack }, { ClientConfigSchema }] = await Promise.all([
    import('./xds'),
    import('@bufbuild/protobuf/wkt'),
    import('../gen/envoy/service/status/v3/csds_pb'),
  ]);
  const res = await xdsRequest(options, 'istio.io/debug/syncz');
  const cp = controlPlaneInfo(res);
  const revision = (ctx.flags['revision'] as string | undefined) ?? '';
  const mesh: ServerInfo[] = res.controlPlane
    ? [{ Component: cp.Component, Info: cp.Info as Partial<BuildInfo>, Revision: revision }]
    : [{ Component: 'MISSING CP ID', Info: { version: 'MISSING CP ID' }, Revision: 'MISSING CP ID' }];
  const proxies: ProxyInfo[] = [];
  for (const r of res.resources) {
    const cc = anyUnpack(r, ClientConfigSchema);
    if (!cc) throw new CommandError(`unexpected resource type "${r.typeUrl}"`);
    const md = (cc.node?.metadata ?? {}) as Record<string, JsonValue>;
    const v = md['MESH_VERSION'] ?? md['ISTIO_VERSION'];
    proxies.push({ ID: cc.node?.id ?? '', MeshVersion: typeof v === 'string' ? v : '' });
  }
  return { mesh, proxies };
}

function renderProxyVersions(proxies: readonly ProxyInfo[]): string {
  if (!proxies.length) return 'none';
  const byVersion = new Map<string, string[]>();
  for (const p of proxies) byVersion.set(p.MeshVersion, [...(byVersion.get(p.MeshVersion) ?? []), p.ID]);
  return [...byVersion.keys()]
    .sort()
    .map((v) => `${v} (${byVersion.get(v)!.length} proxies)`)
    .join(', ');
}

function goQuote(s: string): string {
  return JSON.stringify(s);
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]),
    );
  return v;
}

/** Prints the version report; `withRemote` false prints the client alone. */
export async function printVersion(ctx: RunContext, withRemote: boolean): Promise<number> {
  const output = (ctx.flags['output'] as string | undefined) ?? '';
  if (output !== '' && output !== 'yaml' && output !== 'json') throw new CommandError(`--output must be 'yaml' or 'json'`);
  const client = buildInfo();
  let mesh: ServerInfo[] | undefined;
  let proxies: ProxyInfo[] | undefined;
  if (withRemote) {
    try {
      ({ mesh, proxies } = await remote(ctx));
    } catch (e) {
      // Istio prints what went wrong and still reports the client version.
      ctx.stderr.write(`Mesh is not present in the cluster: ${(e as Error).message}\n`);
    }
  }
  if (output === 'json' || output === 'yaml') {
    const doc: Record<string, unknown> = { clientVersion: client };
    if (mesh) doc.meshVersion = mesh;
    if (proxies) doc.dataPlaneVersion = proxies;
    ctx.stdout.write(output === 'json' ? JSON.stringify(doc, null, 2) + '\n' : jsonToGoYaml(sortKeys(doc)) + '\n');
    return 0;
  }
  const short = ctx.flags['short'] !== false;
  let out = '';
  if (short) {
    out += `client version: ${client.version}\n`;
    if (mesh) {
      const identical = mesh.length > 0 && mesh.every((m) => m.Info.version === mesh![0]!.Info.version);
      for (const m of identical ? [{ ...mesh[0]!, Component: 'control plane' }] : mesh) out += `${m.Component} version: ${m.Info.version ?? ''}\n`;
    }
    if (proxies) out += `data plane version: ${renderProxyVersions(proxies)}\n`;
  } else {
    out += `client version: ${longForm(client)}\n`;
    for (const m of mesh ?? []) out += `${m.Component} version: ${longForm({ ...buildInfo(), ...m.Info } as BuildInfo)}\n`;
    for (const p of proxies ?? []) out += `data plane version: version.ProxyInfo{ID:${goQuote(p.ID)}, MeshVersion:${goQuote(p.MeshVersion)}}\n`;
  }
  ctx.stdout.write(out);
  return 0;
}

export const run: Handler = async (ctx) => printVersion(ctx, ctx.flags['remote'] !== false);
