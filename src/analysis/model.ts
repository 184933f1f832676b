// What the analyzers see: resources read from files or the cluster (mesh kinds through the config
// model, the orchestrator objects as written), each with where it came from; the mesh config; and the context
// they report into (Istio's analysis.Context over its in-memory store).
import type { Config } from '../config/types';
import { type Arg, LEVEL_ORDER, type MessageType } from './messages';

/** A field's path inside a resource (`spec`, `http`, 0, `route`...). */
export type FieldPath = readonly (string | number)[];

export interface Origin {
  file: string;
  /** Line the resource starts on. */
  line: number;
  /** Line of a scalar field inside the resource, when there is one. */
  lineOf(path: FieldPath): number | undefined;
}

export interface Resource {
  kind: string;
  name: string;
  /** '' for cluster-scoped kinds. */
  namespace: string;
  labels: Readonly<Record<string, string>>;
  annotations: Readonly<Record<string, string>>;
  /** The object as written (spec, status, data, webhooks…). */
  object: Readonly<Record<string, unknown>>;
  /** Mesh kinds: the config model's resource (its spec is what analyzers read). */
  config?: Config;
  origin?: Origin;
  /** A stand-in added for files-only analysis (the default ingress gateway), not something the user wrote. */
  synthetic?: boolean;
}

/** `namespace/name`, or `name` for cluster-scoped resources (resource.FullName.String). */
export function fullName(r: Pick<Resource, 'name' | 'namespace'>): string {
  return r.namespace ? `${r.namespace}/${r.name}` : r.name;
}

/** The mesh kinds' spec (validated, nulls removed); the orchestrator kinds' `spec` as written. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function specOf(r: Resource): any {
  if (r.config) return r.config.spec;
  const s = r.object.spec;
  return s && typeof s === 'object' && !Array.isArray(s) ? s : {};
}

/** The subset of MeshConfig the analyzers read, with Istio's defaults (mesh naming). */
export interface AnalysisMeshConfig {
  rootNamespace: string;
  ingressControllerMode: string;
  ingressService: string;
  proxyMetadata: Readonly<Record<string, string>>;
  /** defaultConfig.image.imageType ('' when unset). */
  defaultImageType: string;
  defaultAccessLogProviders: readonly string[];
  /** Names of extension providers by type (`lightstep`, `envoyOtelAls`…). */
  extensionProviders: ReadonlyArray<{ name: string; type: string }>;
}

export interface Message {
  type: MessageType;
  params: readonly Arg[];
  resource?: Resource;
  /** Line of the field the message is about; 0 means the resource's own line. */
  line: number;
}

export interface Analyzer {
  name: string;
  description: string;
  /** Kinds the analyzer reads (Istio's Metadata.Inputs), for documentation. */
  inputs: readonly string[];
  analyze(ctx: AnalysisContext): void;
}

/** The store analyzers read and the messages they report, per analyzer. */
export class AnalysisContext {
  private readonly byKind = new Map<string, Resource[]>();
  private readonly byKey = new Map<string, Resource>();
  readonly messages: Array<Message & { analyzer: string }> = [];
  current = '';

  constructor(
    resources: readonly Resource[],
    readonly mesh: AnalysisMeshConfig,
    /** The system namespace (-i), Istio's istio-system. */
    readonly meshNamespace: string,
  ) {
    for (const r of resources) {
      const key = `${r.kind}/${r.namespace}/${r.name}`;
      const prev = this.byKey.get(key);
      this.byKey.set(key, r);
      const list = this.byKind.get(r.kind) ?? [];
      if (prev) list.splice(list.indexOf(prev), 1, r);
      else list.push(r);
      this.byKind.set(r.kind, list);
    }
    for (const list of this.byKind.values()) list.sort((a, b) => (fullName(a) < fullName(b) ? -1 : fullName(a) > fullName(b) ? 1 : 0));
  }

  list(kind: string): readonly Resource[] {
    return this.byKind.get(kind) ?? [];
  }

  find(kind: string, namespace: string, name: string): Resource | undefined {
    return this.byKey.get(`${kind}/${namespace}/${name}`);
  }

  report(type: MessageType, resource: Resource | undefined, params: readonly Arg[], line?: number): void {
    this.messages.push({ type, params, resource, line: line ?? 0, analyzer: this.current });
  }
}

/** Severity comparison: `a` is at least as severe as `b`. */
export function atLeast(a: MessageType['level'], b: MessageType['level']): boolean {
  return LEVEL_ORDER[a] <= LEVEL_ORDER[b];
}
