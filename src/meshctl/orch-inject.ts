// `meshctl orch-inject` (istioctl kube-inject): sidecar injection of workloads in files. The injector
// configuration, values and mesh config come from --injectConfigFile, --valuesFile, --meshConfigFile (or a
// MeshOperator file with --operatorFileName); whatever is not given comes from the configuration built into
// mesh (Istio's default chart rendering), since there is no cluster to read the ConfigMaps from.
import { CommandError, flagString, type Handler } from '../cli/context';
import { parseGoYaml, GoYamlParseError } from '../lib/goyaml-parse';
import { builtinInjectConfig, readInjectConfigFile } from '../inject/config';
import { InjectionError, parseTemplates, parseValues } from '../inject/inject';
import { MeshConfigError, readMeshConfig, type MeshConfig } from '../inject/mesh';
import { injectResources } from '../inject/resources';
import { TemplateError, TemplateParseError, TemplateExecError } from '../lib/gotemplate';
import { readInput, writeOutputFile } from './io';

function multiError(errs: string[]): string {
  return `${errs.length} error${errs.length > 1 ? 's' : ''} occurred:\n${errs.map((e) => `\t* ${e}`).join('\n')}\n\n`;
}

/** spec.values and spec.meshConfig of a MeshOperator file. */
function operatorConfig(file: string): { values?: string; mesh?: MeshConfig } {
  let doc: unknown;
  try {
    doc = parseGoYaml(readInput(file));
  } catch (e) {
    if (e instanceof GoYamlParseError) throw new CommandError(`${file}: ${e.message}`);
    throw e;
  }
  const spec = (doc as { spec?: Record<string, unknown> } | null)?.spec;
  if (!spec || typeof spec !== 'object') return {};
  const out: { values?: string; mesh?: MeshConfig } = {};
  if (spec.values !== undefined) out.values = JSON.stringify(spec.values ?? {});
  if (spec.meshConfig !== undefined) out.mesh = readMeshConfig(JSON.stringify(spec.meshConfig ?? {}), `${file}: spec.meshConfig`);
  return out;
}

export const run: Handler = async (ctx) => {
  const inFile = flagString(ctx, 'filename');
  const outFile = flagString(ctx, 'output');
  const meshConfigFile = flagString(ctx, 'meshConfigFile');
  const injectConfigFile = flagString(ctx, 'injectConfigFile');
  const valuesFile = flagString(ctx, 'valuesFile');
  const operatorFile = flagString(ctx, 'operatorFileName');
  let revision = flagString(ctx, 'revision');
  if (revision === 'default') revision = '';

  const flagErrs: string[] = [];
  if (inFile === '') flagErrs.push('filename not specified (see --filename or -f)');
  if (meshConfigFile === '' && flagString(ctx, 'meshConfigMapName') === '' && operatorFile === '') {
    flagErrs.push('--meshConfigFile or --meshConfigMapName or --operatorFileName must be set');
  }
  if (flagErrs.length) throw new CommandError(multiError(flagErrs).trimEnd());

  try {
    const input = readInput(inFile);
    const builtin = builtinInjectConfig();
    const op = operatorFile ? operatorConfig(operatorFile) : {};
    let meshConfig = op.mesh;
    if (!meshConfig)
      meshConfig = meshConfigFile
        ? readMeshConfig(readInput(meshConfigFile), meshConfigFile)
        : readMeshConfig(builtin.meshText, 'built-in mesh config');
    const rawTemplates = injectConfigFile ? readInjectConfigFile(readInput(injectConfigFile), injectConfigFile) : builtin.config.templates;
    const valuesText = op.values ?? (valuesFile ? readInput(valuesFile) : builtin.valuesText);
    const templates = parseTemplates(rawTemplates, ctx.env);
    const values = parseValues(valuesText, valuesFile || 'built-in values');
    const warnings: string[] = [];
    const out = injectResources(input, { templates, values, revision, meshConfig, env: ctx.env, warn: (w) => warnings.push(w) });
    if (outFile) writeOutputFile(outFile, out);
    else ctx.stdout.write(out);
    if (warnings.length) {
      ctx.stderr.write('\n');
      for (const w of warnings) ctx.stderr.write(w + '\n');
    }
    return 0;
  } catch (e) {
    if (
      e instanceof InjectionError ||
      e instanceof MeshConfigError ||
      e instanceof TemplateError ||
      e instanceof TemplateParseError ||
      e instanceof TemplateExecError
    ) {
      throw new CommandError(e.message.trimEnd());
    }
    throw e;
  }
};
