// `meshctl bug-report` with a cluster (a client configuration is found): see cluster.ts. With no cluster: the daemon's debug pages (over xDS, as `x internal-debug` reads them)
// and each selected proxy's admin output (as `proxy-config` reaches it, through the daemon's list of connected
// proxies) into Istio's archive layout, bug-report/{versions, bug-report.log, mesh/<ns>/<daemon>/debug/<page>,
// proxies/<ns>/<pod>/<admin path>}, as bug-report.tar.gz. --timeout bounds the whole collection: what was
// fetched by then is archived. Secret material is redacted unless --full-secrets.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CommandError, flagBool, flagList, flagNumber, flagString, type Handler, type RunContext } from '../../cli/context';
import { buildInfo } from '../../lib/buildinfo';
import { formatDurationMs } from '../../lib/duration';
import { readInput } from '../io';
import { connectedClients, proxyTargetOf, proxyDo, type AdsClientInfo } from '../target';
import { controlPlaneInfo, xdsOptions, xdsRequest, type XdsOptions } from '../xds';
import { orchConfigPath, withOrch } from '../orch';
import { tarGz, type ArchiveFile } from './archive';
import { CLUSTER_READS, collectDaemons, collectObjects, collectProxies, daemonPods, proxyPods } from './cluster';
import { BugReportConfigError, parseBugReportConfig, type BugReportConfig } from './config';
import { isSelected, SelectorError, selectorsFromFlags, type ClusterTree, type SelectionSpec } from './filter';
import { PROXY_CONTAINER } from '../../config/containers';

/** Istio's IstiodDebugURLs (1.26), fetched as the daemon's debug pages. */
export const DAEMON_DEBUG_PAGES = [
  'adsz',
  'authorizationz',
  'cachez',
  'clusterz',
  'configz',
  'endpointShardz',
  'endpointz',
  'inject',
  'krtz',
  'instancesz',
  'mcsz',
  'mesh',
  'networkz',
  'push_status',
  'registryz',
  'resourcesz',
  'syncz',
  'telemetryz',
  'ambientz',
];
/** Istio's ProxyDebugURLs (1.26): admin paths, also the file names under the proxy's directory. */
export const PROXY_ADMIN_PATHS = ['certs', 'clusters', 'config_dump?include_eds', 'stats/prometheus'];
const REDACTED = '[redacted]';
const SECRET_KEYS = new Set(['private_key', 'privateKey', 'password', 'ocsp_staple', 'ocspStaple']);
const PER_REQUEST_MS = 30_000;

/** Replaces secret material in a JSON document: TLS private keys, passwords, and the data of Secret objects. */
export function redactSecrets(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(redactSecrets);
  if (!v || typeof v !== 'object') return v;
  const o = v as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  const isSecret = o.kind === 'Secret';
  for (const [k, x] of Object.entries(o)) {
    if (SECRET_KEYS.has(k)) out[k] = redactLeaves(x);
    else if (isSecret && (k === 'data' || k === 'stringData') && x && typeof x === 'object') out[k] = redactLeaves(x);
    else out[k] = redactSecrets(x);
  }
  return out;
}

function redactLeaves(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(redactLeaves);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, redactLeaves(x)]));
  return typeof v === 'string' ? REDACTED : v;
}

/** A JSON body with its secrets redacted (kept as text when it is not JSON). */
export function redactText(body: string): string {
  let doc: unknown;
  try {
    doc = JSON.parse(body);
  } catch {
    // PEM private keys in plain text (e.g. a debug page that is not JSON)
    return body.replace(/-----BEGIN ([A-Z ]*)PRIVATE KEY-----[\s\S]*?-----END \1PRIVATE KEY-----/g, REDACTED);
  }
  return JSON.stringify(redactSecrets(doc), null, 2) + '\n';
}

class Deadline {
  constructor(readonly at: number) {}
  left(): number {
    return this.at - Date.now();
  }
  expired(): boolean {
    return this.left() <= 0;
  }
  /** A request's own limit: the time left, at most `max`. */
  budget(max = PER_REQUEST_MS): number {
    return Math.max(1, Math.min(max, this.left()));
  }
}

/** One status line rewritten in place on a terminal; nothing otherwise. */
class Progress {
  private readonly tty: boolean;
  private shown = false;
  constructor(private readonly out: NodeJS.WritableStream) {
    this.tty = (out as NodeJS.WriteStream).isTTY === true;
  }
  step(done: number, total: number, what: string): void {
    if (!this.tty) return;
    const width = 24;
    const filled = total ? Math.round((done / total) * width) : width;
    this.out.write(`\r\x1b[K[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} ${what}`);
    this.shown = true;
  }
  end(): void {
    if (this.tty && this.shown) this.out.write('\r\x1b[K');
  }
}

/** The proxy as the selection grammar sees it: namespace, workload (its "deployment"), pod, container. */
function proxyPath(
  c: AdsClientInfo,
  pod: string,
  namespace: string,
): { path: [string, string, string, string]; labels: Record<string, string>; annotations: Record<string, string> } {
  const md = c.metadata ?? {};
  const workload = typeof md['WORKLOAD_NAME'] === 'string' && md['WORKLOAD_NAME'] ? (md['WORKLOAD_NAME'] as string) : pod;
  const map = (v: unknown) => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, string>) : {});
  return { path: [namespace, workload, pod, PROXY_CONTAINER], labels: map(md['LABELS']), annotations: map(md['ANNOTATIONS']) };
}

interface Settings {
  timeoutMs: number;
  dryRun: boolean;
  fullSecrets: boolean;
  include: SelectionSpec[];
  exclude: SelectionSpec[];
  outputDir: string;
  tempDir: string;
  meshNamespace: string;
}

function settings(ctx: RunContext): Settings {
  let file: BugReportConfig = {};
  const filename = flagString(ctx, 'filename');
  try {
    if (filename) file = parseBugReportConfig(readInput(filename), filename);
  } catch (e) {
    if (e instanceof BugReportConfigError) throw new CommandError(e.message);
    throw e;
  }
  let sel: { include: SelectionSpec[]; exclude: SelectionSpec[] };
  try {
    sel = selectorsFromFlags(flagList(ctx, 'include'), flagList(ctx, 'exclude'));
  } catch (e) {
    if (e instanceof SelectorError) throw new CommandError(e.message);
    throw e;
  }
  if (ctx.changed.has('duration') && ctx.changed.has('start-time')) throw new CommandError('only one of --start-time or --duration may be set');
  return {
    timeoutMs: file.commandTimeoutMs ?? flagNumber(ctx, 'timeout'),
    dryRun: file.dryRun ?? flagBool(ctx, 'dry-run'),
    fullSecrets: file.fullSecrets ?? flagBool(ctx, 'full-secrets'),
    // The file's lists replace the flags' (JSON merge); the system-namespace exclude always stays.
    include: file.include ?? sel.include,
    exclude: file.exclude ? [sel.exclude[0]!, ...file.exclude] : sel.exclude,
    outputDir: flagString(ctx, 'output-dir') || process.cwd(),
    tempDir: flagString(ctx, 'dir'),
    meshNamespace: file.meshNamespace ?? flagString(ctx, 'mesh-namespace') ?? 'mesh-system',
  };
}

/** What the run says: progress on stdout, warnings on stderr, and everything in bug-report.log. */
class RunLog {
  readonly lines: string[] = [];
  constructor(private readonly ctx: RunContext) {}
  private add(level: string, line: string): void {
    this.lines.push(`${new Date().toISOString()}\t${level}\t${line}`);
  }
  say(line: string): void {
    this.ctx.stdout.write(line + '\n');
    this.add('info', line);
  }
  note(line: string): void {
    this.add('info', line);
  }
  warn(line: string): void {
    this.ctx.stderr.write(`Warning: ${line}\n`);
    this.add('warn', line);
  }
}

interface SelectedProxy {
  target: ReturnType<typeof proxyTargetOf>;
  path: string[];
}

interface DaemonView {
  daemonId: string;
  daemonVersion: string;
  clients: AdsClientInfo[];
}

/** The daemon's view of its proxies: the one thing without which nothing else can be found. */
async function daemonView(base: XdsOptions): Promise<DaemonView> {
  try {
    // Not bounded by --timeout: without this list there is nothing to archive.
    const listing = { ...base, timeoutMs: PER_REQUEST_MS };
    const res = await xdsRequest(listing, 'istio.io/debug', ['adsz']);
    const cp = controlPlaneInfo(res);
    return { daemonId: cp.ID || 'meshd', daemonVersion: cp.Info?.version ?? '', clients: await connectedClients(listing) };
  } catch (e) {
    throw new CommandError(`cannot collect from the control plane: ${(e as Error).message}`);
  }
}

/** The proxies among the daemon's clients that --include/--exclude select. */
function selectProxies(s: Settings, clients: AdsClientInfo[]): SelectedProxy[] {
  const cluster: ClusterTree = { tree: {}, labels: {}, annotations: {} };
  return clients
    .filter((c) => c.metadata && c.metadata['PROXY_CONFIG'] !== undefined)
    .map((c) => {
      const t = proxyTargetOf(c, 'default');
      const p = proxyPath(c, t.name, t.namespace);
      cluster.labels[`${t.namespace}/${t.name}`] = p.labels;
      cluster.annotations[`${t.namespace}/${t.name}`] = p.annotations;
      return { target: t, path: p.path };
    })
    .filter((p) => isSelected(s.include, s.exclude, cluster, p.path));
}

function sayDryRun(log: RunLog, daemonDir: string, proxies: SelectedProxy[]): void {
  for (const page of DAEMON_DEBUG_PAGES) log.say(`dry run: would fetch the daemon's debug/${page} over xDS into ${daemonDir}/debug/${page}`);
  for (const p of proxies) {
    for (const u of PROXY_ADMIN_PATHS)
      log.say(`dry run: would GET http://${p.target.hosts[0]}:${p.target.adminPort}/${u} into proxies/${p.target.namespace}/${p.target.name}/${u}`);
  }
  log.say('dry run: nothing was fetched or written.');
}

/** Fetches the daemon's debug pages and each proxy's admin pages until done or --timeout, into `files`. */
class Collector {
  readonly files = new Map<string, string>();
  done = 0;
  partial = false;
  readonly steps: number;
  private readonly progress: Progress;

  constructor(
    ctx: RunContext,
    private readonly s: Settings,
    private readonly base: XdsOptions,
    private readonly log: RunLog,
    private readonly proxies: SelectedProxy[],
    private readonly deadline: Deadline,
  ) {
    this.steps = DAEMON_DEBUG_PAGES.length + proxies.length * PROXY_ADMIN_PATHS.length;
    this.progress = new Progress(ctx.stderr);
  }

  private timedOut(): boolean {
    if (!this.deadline.expired()) return false;
    if (!this.partial) this.log.warn(`--timeout ${formatDurationMs(this.s.timeoutMs)} reached: archiving what was collected so far`);
    this.partial = true;
    return true;
  }

  private put(name: string, body: string): void {
    this.files.set(name, this.s.fullSecrets ? body : redactText(body));
  }

  async daemonPages(daemonDir: string): Promise<void> {
    for (const page of DAEMON_DEBUG_PAGES) {
      if (this.timedOut()) break;
      this.progress.step(this.done, this.steps, `meshd debug/${page}`);
      try {
        const res = await xdsRequest({ ...this.base, timeoutMs: this.deadline.budget() }, 'istio.io/debug', [page]);
        const body = res.resources.map((r) => Buffer.from(r.value).toString()).join('\n');
        if (/^404 page not found/.test(body)) this.log.note(`the daemon has no debug/${page}`);
        else this.put(`${daemonDir}/debug/${page}`, body);
      } catch (e) {
        this.log.note(`debug/${page}: ${(e as Error).message}`);
      }
      this.done++;
    }
  }

  async proxyPages(): Promise<void> {
    for (const p of this.proxies) {
      for (const u of PROXY_ADMIN_PATHS) {
        if (this.timedOut()) break;
        this.progress.step(this.done, this.steps, `${p.target.id} ${u}`);
        try {
          this.put(
            `proxies/${p.target.namespace}/${p.target.name}/${u}`,
            await proxyDo(p.target, 'GET', u, p.target.adminPort, this.deadline.budget()),
          );
        } catch (e) {
          this.log.note(`${p.target.id} ${u}: ${(e as Error).message}`);
        }
        this.done++;
      }
    }
    this.progress.end();
  }
}

/** Writes the archive (and the --dir copy), sorted by name. */
function writeArchive(ctx: RunContext, s: Settings, files: Map<string, string>): void {
  const entries: ArchiveFile[] = [...files.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, text]) => ({ name: `bug-report/${name}`, data: Buffer.from(text), mode: 0o644 }));
  if (s.tempDir) {
    for (const e of entries) {
      const f = path.join(s.tempDir, e.name);
      mkdirSync(path.dirname(f), { recursive: true });
      writeFileSync(f, e.data);
    }
  }
  const out = path.join(s.outputDir, 'bug-report.tar.gz');
  ctx.stdout.write(`Creating an archive at ${out}.\n`);
  try {
    mkdirSync(s.outputDir, { recursive: true });
    writeFileSync(out, tarGz(entries));
  } catch (e) {
    throw new CommandError(`cannot write ${out}: ${(e as Error).message}`);
  }
}

/** With a cluster: objects, events, the daemon pods' pages and logs, each proxy pod's dumps and log (cluster.ts). */
async function runWithCluster(ctx: RunContext, s: Settings, log: RunLog): Promise<number> {
  const files = new Map<string, string>();
  const sink = {
    put: (name: string, body: string) => files.set(name, s.fullSecrets ? body : redactText(body)),
    note: (line: string) => log.warn(line),
  };
  const context = flagString(ctx, 'context');
  return withOrch(ctx, 'bug-report', async (client) => {
    log.say(`Collecting from the cluster at ${client.server}.`);
    if (s.dryRun) {
      for (const [file, p] of CLUSTER_READS) log.say(`dry run: would GET ${p} into cluster/${file}`);
      log.say('dry run: nothing was fetched or written.');
      return 0;
    }
    // One read first: a cluster that cannot be reached at all stops here with one line.
    await client.getJson('/version');
    const pods = await collectObjects(client, sink, context);
    const daemons = daemonPods(pods, s.meshNamespace);
    if (daemons.length === 0)
      log.warn(`no daemon pods (app=meshd) in namespace ${s.meshNamespace}: the daemon's debug pages and logs are not in the archive`);
    await collectDaemons(client, sink, daemons, DAEMON_DEBUG_PAGES);
    const proxies = proxyPods(pods, s.include, s.exclude);
    log.note(`${proxies.length} proxy pods selected: ${proxies.map((p) => `${p.metadata.namespace}/${p.metadata.name}`).join(', ') || 'none'}`);
    await collectProxies(client, sink, proxies, PROXY_ADMIN_PATHS);
    const daemonVersions = daemons.map((d) => `${d.metadata.name}: ${(d.spec?.containers ?? []).map((c: { image?: string }) => c.image).join(', ')}`);
    files.set('versions', `client version: ${buildInfo().version}\ncontrol plane pods: ${daemonVersions.join('; ') || 'none found'}\n`);
    files.set('bug-report.log', log.lines.join('\n') + '\n');
    writeArchive(ctx, s, files);
    ctx.stdout.write('Done.\n');
    return 0;
  });
}

export const run: Handler = async (ctx) => {
  const s = settings(ctx);
  if (orchConfigPath(ctx)) return runWithCluster(ctx, s, new RunLog(ctx));
  // --timeout counts from the start, though the daemon's listing itself is not cut short by it.
  const deadline = new Deadline(Date.now() + s.timeoutMs);
  const base = xdsOptions(ctx);
  const log = new RunLog(ctx);
  log.say(
    `Collecting from the control plane at ${base.address || '(no --xds-address)'} (no cluster: orchestrator resources and container logs are not collected).`,
  );
  const { daemonId, daemonVersion, clients } = await daemonView(base);
  const proxies = selectProxies(s, clients);
  log.note(
    `${clients.length} connections to the daemon ${daemonId}; ${proxies.length} proxies selected: ${proxies.map((p) => p.target.id).join(', ') || 'none'}`,
  );

  const daemonDir = `mesh/${s.meshNamespace || 'mesh-system'}/${daemonId}`;
  if (s.dryRun) {
    sayDryRun(log, daemonDir, proxies);
    return 0;
  }
  const c = new Collector(ctx, s, base, log, proxies, deadline);
  await c.daemonPages(daemonDir);
  await c.proxyPages();
  c.files.set('versions', `client version: ${buildInfo().version}\ncontrol plane version: ${daemonVersion || 'unknown'} (${daemonId})\n`);
  log.note(c.partial ? `collection stopped at the timeout after ${c.done} of ${c.steps} requests` : `collected ${c.done} of ${c.steps} requests`);
  c.files.set('bug-report.log', log.lines.join('\n') + '\n');
  writeArchive(ctx, s, c.files);
  ctx.stdout.write(c.partial ? 'Done (partial: the timeout was reached).\n' : 'Done.\n');
  return 0;
};
