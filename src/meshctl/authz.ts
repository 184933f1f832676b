// `meshctl x authz check`: the AuthorizationPolicies a proxy enforces, read back from the RBAC filters of its
// config dump (istioctl 1.26 istioctl/pkg/authz/{authz,analyzer,listener}.go): every dynamic listener's
// filter chains, the HTTP RBAC filters inside each HTTP connection manager and the network RBAC filters,
// policy names `ns[<ns>]-policy[<name>]-rule[<n>]` counted per policy and grouped by action (DENY, ALLOW,
// LOG, then CUSTOM from the `istio-ext-authz-` shadow rules). `authz` at the top level only points here, as
// istioctl's seeExperimentalCmd does. The live dump comes from the proxy's admin port found through the
// daemon (target.ts), as proxy-config reads it.
import { readFileSync } from 'node:fs';
import { CommandError, flagString, type Handler } from '../cli/context';
import { TabWriter } from '../lib/tabwriter';
import type { Any } from '@bufbuild/protobuf/wkt';
import { HttpConnectionManagerSchema } from '../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { RBACSchema as HttpRbacSchema } from '../gen/envoy/extensions/filters/http/rbac/v3/rbac_pb';
import { RBACSchema as NetworkRbacSchema } from '../gen/envoy/extensions/filters/network/rbac/v3/rbac_pb';
import { RBAC_Action } from '../gen/envoy/config/rbac/v3/rbac_pb';
import { ListenerSchema, type Listener } from '../gen/envoy/config/listener/v3/listener_pb';
import { ConfigDump, ConfigDumpError, unpackAs } from './proxyconfig/dump';
import { goFileError } from './files';
import { proxyDo, resolveProxy } from './target';

const ANONYMOUS = '_anonymous_match_nothing_';
const NAME = /(?:istio-ext-authz-)?ns\[(.+)\]-policy\[(.+)\]-rule\[(.+)\]/;
const HCM_NAMES = new Set(['envoy.filters.network.http_connection_manager', 'envoy.http_connection_manager']);
const HTTP_RBAC = 'envoy.filters.http.rbac';
const NETWORK_RBAC = 'envoy.filters.network.rbac';

interface RbacLike {
  rules?: { action: RBAC_Action; policies: Record<string, unknown> };
  shadowRules?: { policies: Record<string, unknown> };
}

/** `ns[default]-policy[httpbin]-rule[0]` → [`httpbin.default`, `0`]; istioctl logs and keeps "" for others. */
function extractName(name: string): [string, string] {
  const m = NAME.exec(name);
  return m ? [`${m[2]}.${m[1]}`, m[3]!] : ['', ''];
}

/** The RBAC filters of the listeners, HTTP and network, in order. */
function rbacFilters(listeners: readonly Listener[]): RbacLike[] {
  const out: RbacLike[] = [];
  const unpack = (tc: Any | undefined, schema: typeof HttpRbacSchema | typeof NetworkRbacSchema): void => {
    if (!tc) return;
    try {
      out.push(unpackAs(tc, schema) as unknown as RbacLike);
    } catch {
      // istioctl logs "found RBAC filter but failed to parse" and goes on
    }
  };
  for (const l of listeners)
    for (const fc of l.filterChains)
      for (const f of fc.filters) {
        const tc = f.configType.case === 'typedConfig' ? f.configType.value : undefined;
        if (HCM_NAMES.has(f.name) && tc) {
          let hcm;
          try {
            hcm = unpackAs(tc, HttpConnectionManagerSchema) as unknown as {
              httpFilters: Array<{ name: string; configType: { case?: string; value?: unknown } }>;
            };
          } catch {
            continue;
          }
          for (const hf of hcm.httpFilters)
            if (hf.name === HTTP_RBAC) unpack(hf.configType.case === 'typedConfig' ? (hf.configType.value as Any) : undefined, HttpRbacSchema);
        } else if (f.name === NETWORK_RBAC) unpack(tc, NetworkRbacSchema);
      }
  return out;
}

/** analyzer.Print: `ACTION  AuthorizationPolicy  RULES`, DENY, ALLOW, LOG, CUSTOM, names sorted. */
export function authzTable(listeners: readonly Listener[]): string {
  const byAction = new Map<string, Set<string>>();
  const rules = new Map<string, Set<string>>();
  const add = (action: string, name: string, rule: string) => {
    if (!byAction.has(action)) byAction.set(action, new Set());
    if (!rules.has(name)) rules.set(name, new Set());
    byAction.get(action)!.add(name);
    rules.get(name)!.add(rule);
  };
  for (const r of rbacFilters(listeners)) {
    const action = RBAC_Action[r.rules?.action ?? RBAC_Action.ALLOW];
    const policies = Object.keys(r.rules?.policies ?? {});
    for (const name of policies) add(action, ...extractName(name));
    for (const name of Object.keys(r.shadowRules?.policies ?? {})) if (name.startsWith('istio-ext-authz-')) add('CUSTOM', ...extractName(name));
    if (policies.length === 0) add(action, ANONYMOUS, '0');
  }
  const w = new TabWriter(0, 3).row('ACTION', 'AuthorizationPolicy', 'RULES');
  for (const action of ['DENY', 'ALLOW', 'LOG', 'CUSTOM'])
    for (const name of [...(byAction.get(action) ?? [])].sort()) w.row(action, name, rules.get(name)!.size);
  return w.flush();
}

/** Dynamic listeners in their active state (configdump.Wrapper.GetDynamicListenerDump). */
function dynamicListeners(dump: ConfigDump): Listener[] {
  let d;
  try {
    d = dump.listenerDump();
  } catch (e) {
    throw new CommandError(`failed to get dynamic listener dump: ${(e as Error).message}`);
  }
  return d.dynamicListeners.flatMap((l) => (l.activeState?.listener ? [unpackAs(l.activeState.listener, ListenerSchema) as Listener] : []));
}

export const check: Handler = async (ctx) => {
  const file = flagString(ctx, 'file');
  let text: string;
  if (file) {
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      throw new CommandError(`failed to get config dump from file ${file}: ${goFileError('open', file, e)}`);
    }
  } else if (ctx.args.length === 1) {
    const target = await resolveProxy(ctx, ctx.args[0]!);
    text = await proxyDo(target, 'GET', 'config_dump');
  } else throw new CommandError(`expecting pod name or config dump, found: ${ctx.args.length}`);
  let dump: ConfigDump;
  try {
    dump = ConfigDump.parse(text);
  } catch (e) {
    if (e instanceof ConfigDumpError) throw new CommandError(`failed to unmarshal proxy config: ${e.message}`);
    throw e;
  }
  ctx.stdout.write(authzTable(dynamicListeners(dump)));
  return 0;
};

/** The top-level `authz`: istioctl's seeExperimentalCmd. */
export const pointer: Handler = async () => {
  throw new CommandError('(authz is experimental. Use `meshctl experimental authz`)');
};
