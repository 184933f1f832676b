// meshctl manifest generate | translate, install/upgrade (and manifest install) and uninstall. Everything is
// computed before anything is written: a failure prints one error and leaves no partial output.
import { existsSync, mkdirSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CommandError, type Handler, type RunContext } from '../cli/context';
import { jsonToGoYaml } from '../lib/goyaml';
import { mergeInputs, type MergedOperator } from './operator';
import { generatedText, renderAll, sortObjects, type Generated } from './render';
import { ManifestInputError, manifestSource } from './source';
import { dryRunText, installPlan, type InstallPlan } from './plan';

function str(ctx: RunContext, name: string): string {
  const v = ctx.flags[name];
  return typeof v === 'string' ? v : '';
}
function list(ctx: RunContext, name: string): string[] {
  const v = ctx.flags[name];
  if (Array.isArray(v)) return [...(v as string[])];
  return typeof v === 'string' && v ? [v] : [];
}
function bool(ctx: RunContext, name: string): boolean {
  return ctx.flags[name] === true;
}

function noArgs(ctx: RunContext): void {
  if (ctx.args.length) throw new CommandError(`${ctx.path[ctx.path.length - 1]} accepts no positional arguments, got ${JSON.stringify(ctx.args)}`);
}

/** The merged MeshOperator from -f/--set/--manifests/--revision, errors as one CommandError. */
export function mergedFromFlags(ctx: RunContext, files = list(ctx, 'filename'), clusterSettings: string[] = []): MergedOperator {
  const manifests = str(ctx, 'manifests') || str(ctx, 'charts');
  try {
    return mergeInputs(
      { files, sets: list(ctx, 'set'), manifests, revision: str(ctx, 'revision'), force: bool(ctx, 'force'), clusterSettings },
      manifestSource,
    );
  } catch (e) {
    if (e instanceof ManifestInputError) throw new CommandError(`generate config: ${e.message}`);
    throw e;
  }
}

/**
 * Istio's clusterSpecificSettings: on GKE (a server version with `-gke`) the CNI agent goes to kube-system with the
 * gke platform settings and no resource quota.
 */
async function clusterSpecificSettings(ctx: RunContext): Promise<string[]> {
  const { meshctlOrchClient } = await import('../meshctl/orch');
  const client = await meshctlOrchClient(ctx, '--cluster-specific');
  try {
    const v = (await client.getJson('/version')) as { gitVersion?: string };
    if (ctx.env.AUTO_GKE_DETECTION !== 'false' && (v.gitVersion ?? '').includes('-gke')) {
      return ['components.cni.namespace=kube-system', 'values.global.platform=gke', 'values.cni.resourceQuotas.enabled=false'];
    }
    return [];
  } catch (e) {
    throw new CommandError(`fail to get the orchestrator version: ${(e as Error).message}`);
  } finally {
    client.close();
  }
}

function generate(m: MergedOperator): Generated {
  try {
    return renderAll(m);
  } catch (e) {
    if (e instanceof ManifestInputError) throw new CommandError(`generate config: ${e.message}`);
    throw e;
  }
}

function warn(ctx: RunContext, warnings: readonly string[]): void {
  for (const w of warnings) ctx.stderr.write(`❗ ${w}\n`);
}

export const generateCommand: Handler = async (ctx) => {
  noArgs(ctx);
  const m = mergedFromFlags(ctx, list(ctx, 'filename'), bool(ctx, 'cluster-specific') ? await clusterSpecificSettings(ctx) : []);
  const g = generate(m);
  warn(ctx, g.warnings);
  ctx.stdout.write(generatedText(g));
  return 0;
};

/** The README `manifest translate` writes beside the values files. */
function translateReadme(results: string[]): string {
  return `# Migrating from meshctl install to Helm

For each component, a values file (\`<component>-values.yaml\`) holds the chart values equivalent to the
MeshOperator given to \`meshctl manifest translate\`, and \`install-<component>.sh\` labels the objects already in the
cluster as part of the Helm release and runs the matching \`helm upgrade --install\` with the chart from the mesh
release's \`manifests/charts\` directory.

${results.join('\n')}
`;
}

export const translateCommand: Handler = async (ctx) => {
  noArgs(ctx);
  const m = mergedFromFlags(ctx);
  const g = generate(m);
  warn(ctx, g.warnings);
  const files = new Map<string, string>();
  const results: string[] = [];
  for (const rc of g.components) {
    const name = rc.spec.name || rc.component.specName;
    if (!rc.component.releaseName) {
      results.push(`* ❌ **Component \`${name}\`**: migration is **NOT** directly supported!`);
      continue;
    }
    const ns = rc.spec.namespace;
    const valuesName = `${name}-values.yaml`;
    files.set(valuesName, jsonToGoYaml(rc.values));
    const commands = ['#!/usr/bin/env bash', '', '# Label/Annotate resources to mark them a part of the Helm release.'];
    for (const o of sortObjects([...rc.objects])) {
      const api = String(o.apiVersion);
      const grp = api.includes('/') ? api.slice(0, api.indexOf('/')) : '';
      const gk = grp ? `${o.kind}.${grp}` : String(o.kind);
      const nsFlag = o.metadata?.namespace ? ` --namespace=${o.metadata.namespace}` : '';
      commands.push(
        `kubectl annotate ${gk}${nsFlag} ${o.metadata?.name} meta.helm.sh/release-name=${name}`,
        `kubectl annotate ${gk}${nsFlag} ${o.metadata?.name} meta.helm.sh/release-namespace=${ns}`,
        `kubectl label ${gk}${nsFlag} ${o.metadata?.name} app.kubernetes.io/managed-by=Helm`,
      );
    }
    commands.push(
      '\n',
      '# Run the actual Helm install operation',
      `helm upgrade --install ${name} --namespace ${ns} -f ${valuesName} manifests/charts/${rc.component.chart}`,
    );
    files.set(`install-${name}.sh`, commands.join('\n') + '\n');
    results.push(
      `* ✅ **Component \`${name}\`**: migration is supported!\n\n  The translated values have been written to ${valuesName}.\n` +
        `  You may use these directly, or follow the guided \`install-${name}.sh\` script.`,
    );
  }
  files.set('README.md', translateReadme(results));
  let out = str(ctx, 'output');
  if (bool(ctx, 'dry-run')) {
    for (const [name, text] of files) ctx.stdout.write(`# ${name}\n${text}${text.endsWith('\n') ? '' : '\n'}---\n`);
    return 0;
  }
  try {
    if (!out) out = mkdtempSync(path.join(os.tmpdir(), 'meshctl-migrate-'));
    else if (existsSync(out) && !statSync(out).isDirectory()) throw new CommandError(`--output ${out}: not a directory`);
    else mkdirSync(out, { recursive: true });
    for (const [name, text] of files) writeFileSync(path.join(out, name), text, { mode: name.endsWith('.sh') ? 0o755 : 0o644 });
  } catch (e) {
    if (e instanceof CommandError) throw e;
    throw new CommandError(`--output ${out}: ${(e as Error).message}`);
  }
  ctx.stdout.write(`Output written to ${out}! See the README.md for next steps\n`);
  return 0;
};

// ---------------------------------------------------------------------------------------------------------------
// install / upgrade / uninstall

function installWith(ctx: RunContext, dryRun: boolean): Promise<number> {
  noArgs(ctx);
  const m = mergedFromFlags(ctx);
  let plan: InstallPlan;
  try {
    plan = installPlan(m);
  } catch (e) {
    if (e instanceof ManifestInputError) throw new CommandError(`generate config: ${e.message}`);
    throw e;
  }
  warn(ctx, plan.warnings);
  if (dryRun) {
    ctx.stdout.write(dryRunText(plan));
    // as istioctl: verification needs what a dry run does not make
    if (bool(ctx, 'verify')) ctx.stdout.write('Control plane health check is not applicable in dry-run mode\n');
    return Promise.resolve(0);
  }
  const o = { skipConfirmation: bool(ctx, 'skip-confirmation'), timeoutMs: readinessTimeout(ctx), verify: bool(ctx, 'verify') };
  return import('./apply').then((a) => a.install(ctx, plan, o));
}

function readinessTimeout(ctx: RunContext): number {
  const v = ctx.flags['readiness-timeout'];
  return typeof v === 'number' ? v : 300_000;
}

export const installCommand: Handler = (ctx) => installWith(ctx, bool(ctx, 'dry-run'));

export const uninstallCommand: Handler = async (ctx) => {
  noArgs(ctx);
  const purge = bool(ctx, 'purge');
  const file = str(ctx, 'filename');
  const revision = str(ctx, 'revision');
  if (!purge && !revision && !file && !list(ctx, 'set').some((s) => s.startsWith('revision='))) {
    throw new CommandError('at least one of the --revision (or --set revision=<revision>), --filename or --purge flags must be set');
  }
  if (purge && (revision || file)) {
    ctx.stderr.write('❗ --purge is set: --revision and --filename are ignored and every mesh revision is removed\n');
  }
  const { uninstall } = await import('./apply');
  let fromFile: InstallPlan | undefined;
  if (file && !purge) fromFile = installPlan(mergedFromFlags(ctx, [file]));
  const rev =
    revision ||
    list(ctx, 'set')
      .find((s) => s.startsWith('revision='))
      ?.slice('revision='.length) ||
    '';
  return uninstall(ctx, {
    purge,
    revision: purge ? '' : rev || fromFile?.revision || 'default',
    plan: purge ? undefined : fromFile,
    dryRun: bool(ctx, 'dry-run'),
    skipConfirmation: bool(ctx, 'skip-confirmation'),
    verbose: bool(ctx, 'verbose'),
  });
};

export { generatedText, dryRunText as installDryRunText };
