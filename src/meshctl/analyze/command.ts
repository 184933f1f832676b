// `meshctl analyze [<file>…]`: istioctl analyze on the live cluster (./cluster.ts, ./live.ts) with files
// merged over it, or on files alone (--use-kube=false, or no cluster configured). Output, exit codes and
// the lines around the messages follow istioctl 1.26: messages on stdout, notes on stderr, 79 when a
// message reaches --failure-threshold, 65 when input could not be parsed.
import fs from 'node:fs';
import { CommandError, flagBool, flagList, flagNumber, flagString, type Handler, type RunContext } from '../../cli/context';
import { formatDurationMs } from '../../lib/duration';
import { loadEnvoyFilterTypes } from '../../config/validate';
import { goFileError, hasManifestExtension, MANIFEST_EXTENSIONS, readStdin, walkFiles } from '../files';
import { DOCS, multiError } from '../text';
import { ALL_MESSAGE_TYPES, type Level } from '../../analysis/messages';
import { ALL_ANALYZERS, analyzersAsString, selectAnalyzers } from '../../analysis/analyzers';
import { type OutputFormat, printMessages } from './format';
import { defaultResources, loadResources } from './load';
import { atLeast, type Resource } from '../../analysis/model';
import { analyze, AnalysisTimeout, defaultMeshConfig, parseMeshConfig, type Suppression } from '../../analysis/run';
import { liveInput } from './cluster';

/** Exit codes of istioctl's sysexits.go. */
export const EXIT_DATA_ERROR = 65;
export const EXIT_ANALYZER_FOUND_ISSUES = 79;

interface Input {
  name: string;
  text: string;
}

function skipping(ctx: RunContext, f: string): void {
  ctx.stderr.write(`Skipping file ${f}, recognized file extensions are: [${MANIFEST_EXTENSIONS.join(' ')}]\n`);
}

/** gatherFiles: `-` is stdin, directories are walked, other extensions skipped with a note. */
function gatherInputs(ctx: RunContext, args: readonly string[], format: OutputFormat): Input[] {
  const out: Input[] = [];
  const read = (f: string): string => {
    try {
      return fs.readFileSync(f, 'utf8');
    } catch (e) {
      throw new CommandError(goFileError('open', f, e));
    }
  };
  for (const f of args) {
    if (f === '-') {
      if (process.stdin.isTTY && format === 'log') ctx.stdout.write('Reading from stdin:\n');
      out.push({ name: f, text: readStdin() });
      continue;
    }
    let st: fs.Stats;
    try {
      st = fs.statSync(f);
    } catch (e) {
      throw new CommandError(goFileError('stat', f, e));
    }
    if (st.isDirectory()) {
      let files: string[];
      try {
        files = walkFiles(f);
      } catch (e) {
        throw new CommandError(goFileError('lstat', f, e));
      }
      for (const p of files) {
        if (hasManifestExtension(p)) out.push({ name: p, text: read(p) });
        else skipping(ctx, p);
      }
    } else if (hasManifestExtension(f)) out.push({ name: f, text: read(f) });
    else skipping(ctx, f);
  }
  return out;
}

function parseSuppressions(ctx: RunContext): Suppression[] {
  const codes = new Set(ALL_MESSAGE_TYPES.map((t) => t.code));
  return flagList(ctx, 'suppress').map((s) => {
    const parts = s.split('=');
    if (parts.length !== 2) throw new CommandError(`${s} is not a valid suppression value. See meshctl analyze --help`);
    if (!codes.has(parts[0]!))
      ctx.stderr.write(`Warning: Supplied message code '${parts[0]}' is an unknown message code and will not have any effect.\n`);
    return { code: parts[0]!, resource: parts[1]! };
  });
}

function colorize(ctx: RunContext): boolean {
  if (ctx.changed.has('color')) return flagBool(ctx, 'color');
  if ((ctx.env.TERM ?? '').toLowerCase() === 'dumb') return false;
  return Boolean((ctx.stdout as NodeJS.WriteStream).isTTY);
}

/** --meshConfigFile's MeshConfig, or the default. */
function meshConfigFromFlag(ctx: RunContext): ReturnType<typeof defaultMeshConfig> {
  const meshConfigFile = flagString(ctx, 'meshConfigFile');
  if (!meshConfigFile) return defaultMeshConfig();
  let text: string;
  try {
    text = fs.readFileSync(meshConfigFile, 'utf8');
  } catch (e) {
    throw new CommandError(`--meshConfigFile: ${goFileError('open', meshConfigFile, e)}`);
  }
  try {
    return parseMeshConfig(text);
  } catch (e) {
    throw new CommandError(`--meshConfigFile ${meshConfigFile}: ${(e as Error).message}`);
  }
}

/** The resources of every input after `base`; parse errors reported on stderr as istioctl does. */
function loadInputs(
  ctx: RunContext,
  inputs: Input[],
  namespace: string,
  base: readonly Resource[],
): { resources: Resource[]; badFiles: number; skipped: string[] } {
  const resources: Resource[] = [...base];
  const parseErrors: string[] = [];
  let badFiles = 0;
  const skipped: string[] = [];
  for (const input of inputs) {
    const loaded = loadResources(input.text, input.name, namespace);
    resources.push(...loaded.resources);
    skipped.push(...loaded.skipped);
    if (loaded.errors.length > 0) {
      badFiles++;
      parseErrors.push(...loaded.errors.map((e) => `errors parsing content ${JSON.stringify(input.name)}: ${e}`));
    }
  }
  if (parseErrors.length > 0) ctx.stderr.write(`Error(s) adding files: ${multiError(parseErrors)}`);
  return { resources, badFiles, skipped };
}

/** istioctl's line when no message reaches the output threshold. */
function noIssuesText(inputs: Input[], target: string, badFiles: number): string {
  if (badFiles > 0)
    return `No validation issues found when analyzing ${target} (but ${badFiles} ${badFiles === 1 ? 'file' : 'files'} could not be parsed).\n`;
  const names = inputs.map((i) => i.name);
  if (names.length > 1) return `\u2714 No validation issues found when analyzing:\n  - ${names.join('\n  - ')}\n`;
  if (names.length === 1) return `\u2714 No validation issues found when analyzing ${names[0]}.\n`;
  return `\u2714 No validation issues found when analyzing ${target}.\n`;
}

export const run: Handler = async (ctx) => {
  const format = flagString(ctx, 'output').toLowerCase() as OutputFormat;
  if (flagBool(ctx, 'list-analyzers')) {
    ctx.stdout.write(analyzersAsString(ALL_ANALYZERS));
    return 0;
  }
  if (flagBool(ctx, 'recursive')) {
    ctx.stdout.write('The recursive flag has been removed and is hardcoded to true without explicitly specifying it.\n');
    return 0;
  }
  const inputs = gatherInputs(ctx, ctx.args, format);
  const allNamespaces = flagBool(ctx, 'all-namespaces');
  const meshNamespace = flagString(ctx, 'meshNamespace') || 'mesh-system';
  const suppressions = parseSuppressions(ctx);
  const live = await liveInput(ctx, inputs.length > 0, meshNamespace);
  if (live === 'namespace-missing') return 0;
  const namespace = flagString(ctx, 'namespace') || live?.namespace || 'default';

  // --meshConfigFile wins over the cluster's mesh ConfigMap, which wins over the defaults.
  const mesh = flagString(ctx, 'meshConfigFile') ? meshConfigFromFlag(ctx) : (live?.mesh ?? defaultMeshConfig());
  // Files-only analysis stands in the resources a cluster would have (the ingress gateway); files are
  // read after the cluster's objects, so a file's object replaces the cluster's of the same name.
  const base = live ? live.resources : defaultResources(mesh, meshNamespace);
  const { resources, badFiles, skipped } = loadInputs(ctx, inputs, namespace, base);

  if (resources.some((r) => r.kind === 'EnvoyFilter')) await loadEnvoyFilterTypes();
  const target = allNamespaces ? 'all namespaces' : `namespace: ${namespace}`;
  const timeoutMs = flagNumber(ctx, 'timeout');
  let result;
  try {
    result = analyze(resources, {
      analyzers: selectAnalyzers(flagList(ctx, 'analyzer')),
      namespace: allNamespaces ? undefined : namespace,
      suppressions,
      mesh,
      meshNamespace,
      deadline: timeoutMs > 0 ? performance.now() + timeoutMs : undefined,
    });
  } catch (e) {
    if (e instanceof AnalysisTimeout) throw new CommandError(`analysis timed out after ${formatDurationMs(timeoutMs)}: ${e.message}`);
    throw e;
  }

  if (flagBool(ctx, 'verbose')) {
    ctx.stderr.write(`Analyzed resources in ${target}\n`);
    if (live && live.missing.length > 0) ctx.stderr.write(`Not served by the cluster (no such CRD): ${live.missing.join(', ')}\n`);
    if (skipped.length > 0) ctx.stderr.write(`Skipped documents (no analyzer reads their kind):\n${skipped.map((s) => `\t ${s}\n`).join('')}`);
    ctx.stderr.write(`Executed analyzers:\n${result.executed.map((a) => `\t ${a}\n`).join('')}\n`);
  }

  const outputThreshold = flagString(ctx, 'output-threshold') as Level;
  const shown = result.messages.filter((m) => atLeast(m.type.level, outputThreshold));
  ctx.stdout.write(printMessages(shown, format, format === 'log' && colorize(ctx)) + '\n');

  if (shown.length === 0) ctx.stderr.write(noIssuesText(inputs, target, badFiles));

  // Only the log format sets the exit code (istioctl keeps json/yaml output exit 0 for tooling).
  if (format !== 'log') return 0;
  const failureThreshold = flagString(ctx, 'failure-threshold') as Level;
  if (result.messages.some((m) => atLeast(m.type.level, failureThreshold)))
    throw new CommandError(
      `Analyzers found issues when analyzing ${target}.\nSee ${DOCS.configAnalysis} for more information about causes and resolutions.`,
      EXIT_ANALYZER_FOUND_ISSUES,
    );
  if (badFiles > 0 && !flagBool(ctx, 'ignore-unknown')) throw new CommandError("Some files couldn't be parsed.", EXIT_DATA_ERROR);
  return 0;
};
