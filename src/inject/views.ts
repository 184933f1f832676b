// The injection template's data (Istio's SidecarTemplateData) as Go values: proto messages with their getter
// methods and enums that print their names, the mesh config, the pod's metadata and spec as Go structs.
import { GoMap, GoStruct, GO_STRING, GO_TRUTH } from '../lib/gotemplate';
import type { MeshConfig, ProxyConfig } from './mesh';

export const PROXY_CONFIG_JSON = Symbol('proxyConfig.json');

/** A proto enum value: prints its name, has a String method. */
class EnumView {
  constructor(
    readonly name: string,
    readonly number: number,
  ) {}
  [GO_STRING](): string {
    return this.name;
  }
  [GO_TRUTH](): boolean {
    return this.number !== 0;
  }
  String(): string {
    return this.name;
  }
}

/** A message pointer; `nil` views answer getters with further nil views, as proto getters do. */
class MessageView extends GoStruct {
  constructor(
    private readonly typeName: string,
    private readonly json: Record<string, unknown> | undefined,
  ) {
    super();
  }
  goType(): string {
    return `*v1alpha1.${this.typeName}`;
  }
  [GO_TRUTH](): boolean {
    return this.json !== undefined;
  }
  [GO_STRING](): string {
    return this.json === undefined ? '<nil>' : JSON.stringify(this.json);
  }
  protected field(name: string): unknown {
    return this.json?.[name];
  }
}

class BoolValueView extends MessageView {
  constructor(json: boolean | undefined) {
    super('BoolValue', json === undefined ? undefined : { value: json });
  }
  GetValue(): boolean {
    return (this.field('value') as boolean | undefined) ?? false;
  }
}

class TlsSettingsView extends MessageView {
  constructor(json: Record<string, unknown> | undefined) {
    super('ClientTLSSettings', json);
  }
  GetCaCertificates(): string {
    return (this.field('caCertificates') as string) ?? '';
  }
}

class TracingView extends MessageView {
  constructor(json: Record<string, unknown> | undefined) {
    super('Tracing', json);
  }
  GetTlsSettings(): TlsSettingsView {
    return new TlsSettingsView(this.field('tlsSettings') as Record<string, unknown> | undefined);
  }
}

const INTERCEPTION_NUMBERS: Record<string, number> = { REDIRECT: 0, TPROXY: 1, NONE: 2 };

function capitalize(k: string): string {
  return k.charAt(0).toUpperCase() + k.slice(1);
}

/** .ProxyConfig: the ProxyConfig message. */
export class ProxyConfigView extends GoStruct {
  readonly [PROXY_CONFIG_JSON]: ProxyConfig;
  constructor(pc: ProxyConfig) {
    super();
    this[PROXY_CONFIG_JSON] = pc;
    const self = this as unknown as Record<string, unknown>;
    for (const k of [
      'configPath',
      'binaryPath',
      'serviceCluster',
      'discoveryAddress',
      'statsdUdpAddress',
      'customConfigFile',
      'proxyBootstrapTemplatePath',
      'meshId',
    ]) {
      self[capitalize(k)] = (pc[k] as string) ?? '';
    }
    for (const k of ['proxyAdminPort', 'statNameLength', 'statusPort']) self[capitalize(k)] = BigInt((pc[k] as number) ?? 0);
    self.ProxyMetadata = new GoMap<string>((pc.proxyMetadata as Record<string, string>) ?? null, '');
    self.RuntimeValues = new GoMap<string>((pc.runtimeValues as Record<string, string>) ?? null, '');
    self.ExtraStatTags = (pc.extraStatTags as string[]) ?? null;
    const mode = (pc.interceptionMode as string) ?? 'REDIRECT';
    self.InterceptionMode = new EnumView(mode, INTERCEPTION_NUMBERS[mode] ?? 0);
    self.HoldApplicationUntilProxyStarts = new BoolValueView(pc.holdApplicationUntilProxyStarts as boolean | undefined);
    self.Tracing = new TracingView(pc.tracing as Record<string, unknown> | undefined);
  }
  goType(): string {
    return '*v1alpha1.ProxyConfig';
  }
  GetTracing(): TracingView {
    return new TracingView(this[PROXY_CONFIG_JSON].tracing as Record<string, unknown> | undefined);
  }
  GetProxyMetadata(): GoMap<string> {
    return new GoMap<string>((this[PROXY_CONFIG_JSON].proxyMetadata as Record<string, string>) ?? null, '');
  }
  GetHoldApplicationUntilProxyStarts(): BoolValueView {
    return new BoolValueView(this[PROXY_CONFIG_JSON].holdApplicationUntilProxyStarts as boolean | undefined);
  }
}

/** .MeshConfig. */
export class MeshConfigView extends GoStruct {
  constructor(mc: MeshConfig) {
    super();
    const self = this as unknown as Record<string, unknown>;
    self.TrustDomain = mc.trustDomain;
    self.RootNamespace = mc.rootNamespace;
    self.ProxyListenPort = BigInt(mc.proxyListenPort);
    self.ProxyInboundListenPort = BigInt(mc.proxyInboundListenPort);
    self.DefaultConfig = new ProxyConfigView(mc.defaultConfig);
  }
  goType(): string {
    return '*v1alpha1.MeshConfig';
  }
}

/** A plain Go struct of the given fields (TypeMeta, DeploymentMeta, the template data itself). */
export class PlainStruct extends GoStruct {
  constructor(
    private readonly typeName: string,
    fields: Record<string, unknown>,
  ) {
    super();
    Object.assign(this, fields);
  }
  goType(): string {
    return this.typeName;
  }
}
