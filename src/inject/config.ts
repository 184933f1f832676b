// The injector's configuration (the `config` key of the mesh-sidecar-injector ConfigMap, Istio's inject.Config)
// and the configuration built into mesh for use without a cluster.
import { buildInfo } from '../lib/buildinfo';
import { parseGoYaml, GoYamlParseError } from '../lib/goyaml-parse';
import { DEFAULT_TEMPLATES, MESH_CONFIG, POLICY, TEMPLATES, VALUES } from './builtin.gen';
import { InjectionError, type InjectPolicy, type LabelSelector } from './inject';

export interface InjectConfig extends InjectPolicy {
  defaultTemplates: string[];
  /** Template sources by name. */
  templates: Record<string, string>;
  aliases: Record<string, string[]>;
  injectedAnnotations: Record<string, string>;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Istio's UnmarshalConfig. */
export function parseInjectConfig(text: string, where: string): InjectConfig {
  let doc: unknown;
  try {
    doc = parseGoYaml(text);
  } catch (e) {
    if (e instanceof GoYamlParseError) throw new InjectionError(`failed to unmarshal injection template: ${where}: ${e.message}`);
    throw e;
  }
  if (doc === null || doc === undefined) doc = {};
  if (!isObject(doc)) throw new InjectionError(`failed to unmarshal injection template: ${where}: not a mapping`);
  const templates: Record<string, string> = {};
  if (isObject(doc.templates)) for (const [k, v] of Object.entries(doc.templates)) templates[k] = typeof v === 'string' ? v : '';
  const list = (v: unknown) => (Array.isArray(v) ? v.map(String) : []);
  const aliases: Record<string, string[]> = {};
  if (isObject(doc.aliases)) for (const [k, v] of Object.entries(doc.aliases)) aliases[k] = list(v);
  const defaultTemplates = list(doc.defaultTemplates);
  return {
    policy: typeof doc.policy === 'string' ? doc.policy : '',
    defaultTemplates: defaultTemplates.length ? defaultTemplates : ['sidecar'],
    templates,
    aliases,
    neverInjectSelector: Array.isArray(doc.neverInjectSelector) ? (doc.neverInjectSelector as LabelSelector[]) : [],
    alwaysInjectSelector: Array.isArray(doc.alwaysInjectSelector) ? (doc.alwaysInjectSelector as LabelSelector[]) : [],
    injectedAnnotations: isObject(doc.injectedAnnotations) ? (doc.injectedAnnotations as Record<string, string>) : {},
  };
}

/**
 * kube-inject's readInjectConfigFile: a file that is an injector configuration with templates gives its
 * templates; anything else is taken as the text of the `sidecar` template itself.
 */
export function readInjectConfigFile(text: string, where: string): Record<string, string> {
  try {
    const doc = parseGoYaml(text);
    if (isObject(doc) && isObject(doc.templates) && Object.keys(doc.templates).length > 0) return parseInjectConfig(text, where).templates;
  } catch (e) {
    if (!(e instanceof GoYamlParseError)) throw e;
  }
  return { sidecar: text };
}

/** The built-in configuration: Istio's default chart rendering, images from this build's hub and tag. */
export function builtinInjectConfig(): { config: InjectConfig; valuesText: string; meshText: string } {
  const values = JSON.parse(JSON.stringify(VALUES)) as { global: Record<string, unknown> };
  values.global.hub = 'docker.io/mesh';
  values.global.tag = buildInfo().version;
  const config: InjectConfig = {
    policy: POLICY,
    defaultTemplates: [...DEFAULT_TEMPLATES],
    templates: { ...TEMPLATES },
    aliases: {},
    neverInjectSelector: [],
    alwaysInjectSelector: [],
    injectedAnnotations: {},
  };
  return { config, valuesText: JSON.stringify(values), meshText: MESH_CONFIG };
}
