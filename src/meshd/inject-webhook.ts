// The sidecar injection webhook (Istio's pkg/kube/inject/webhook.go): `POST /inject` and `/inject/…` on
// the webhook HTTPS listener (:15017). The API server sends each Pod being created; the answer is a JSON
// patch made by the same injector as `meshctl orch-inject` (src/inject), under Istio's injection policy
// (the configuration's `policy`, neverInjectSelector / alwaysInjectSelector, the pod's
// `sidecar.mesh.io/inject` label or annotation, host networking, Kubernetes' own namespaces). Which
// namespaces and pods reach the webhook at all — `mesh-injection=enabled`, `mesh.io/rev=<revision>` — is
// the MutatingWebhookConfiguration's namespace and object selectors, evaluated by the API server, as in
// Istio.
//
// The injector configuration is Istio's: the files `config` and `values` under ./var/lib/mesh/inject
// when present, else the ConfigMap `mesh-sidecar-injector` (`-<revision>` for a revision) in the daemon's
// namespace, followed as it changes; with neither, or INJECT_ENABLED=false, there is no injector.
// Path parameters (`/inject/cluster/<id>/net/<network>`, `/inject/:ENV:K=V…`) set the proxy's cluster
// and network as Istio's parseInjectEnvs.
import fs from 'node:fs';
import path from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { OrchApiError, type OrchClient } from '../config/orch/client';
import { ResourceInformer, type RawObject } from '../config/orch/informer';
import { parseInjectConfig, type InjectConfig } from '../inject/config';
import { injectRequired, InjectionError, normalizePod, parseTemplates, parseValues, type InjectionValues, type Templates } from '../inject/inject';
import { defaultMeshConfig, MeshConfigError, readMeshConfig, type MeshConfig } from '../inject/mesh';
import { deployMetaFromPod, injectWorkloadPod, podMeshConfig } from '../inject/resources';
import { registerScope } from '../lib/log';
import { defineCounter } from '../lib/metrics';
import { createJsonPatch } from '../orch/jsonpatch';
import type { JsonObject } from '../orch/typed';
import { readBody, writeText } from '../serve/router';
import { decodeReview, deny } from './webhook';

const log = registerScope('injection', 'sidecar injection webhook');

/** Istio's InjectionDirectory (./var/lib/istio/inject), renamed. */
export const INJECTION_DIRECTORY = './var/lib/mesh/inject';
/** Istio's defaultInjectorConfigMapName, renamed. */
export const INJECTOR_CONFIGMAP = 'mesh-sidecar-injector';

const requests = defineCounter({ name: 'sidecar_injection_requests_total', help: 'Total number of sidecar injection requests.' });
const successes = defineCounter({ name: 'sidecar_injection_success_total', help: 'Total number of successful sidecar injection requests.' });
const skips = defineCounter({ name: 'sidecar_injection_skip_total', help: 'Total number of skipped sidecar injection requests.' });
const failures = defineCounter({ name: 'sidecar_injection_failure_total', help: 'Total number of failed sidecar injection requests.' });

/** Istio's URLParameterToEnv, renamed. */
const URL_PARAMETER_TO_ENV: Readonly<Record<string, string>> = { cluster: 'MESH_META_CLUSTER_ID', net: 'MESH_META_NETWORK' };

/** Istio's parseInjectEnvs: `/inject/k1/v1/k2/v2` (`--slash--` for `/` in values) or `/inject/:ENV:K=V:ENV:…`. */
export function parseInjectEnvs(urlPath: string): Record<string, string> {
  const p = urlPath.replace(/\/$/, '');
  const parts = p.split('/');
  const rest = parts.length >= 3 ? parts.slice(2).join('/') : undefined;
  let list: string[] = [];
  if (rest !== undefined) {
    if (rest.startsWith(':ENV:')) {
      for (const pair of rest.split(':ENV:').slice(1)) {
        const eq = pair.indexOf('=');
        if (eq > 0) list.push(pair.slice(0, eq), pair.slice(eq + 1));
      }
    } else {
      list = rest.split('/').map((v, i) => (i % 2 ? v.replace(/--slash--/g, '/') : v));
    }
  }
  const envs: Record<string, string> = {};
  for (let i = 0; i < list.length; i += 2) {
    const k = list[i]!;
    if (i === list.length - 1) {
      log.warn(`Odd number of inject env entries, ignore the last key ${k}`);
      break;
    }
    const env = URL_PARAMETER_TO_ENV[k] ?? k.toUpperCase();
    if (env !== '') envs[env] = list[i + 1]!;
  }
  return envs;
}

/** What the injector works from; replaced whole when the configuration changes. */
export interface InjectorState {
  config: InjectConfig;
  templates: Templates;
  values: InjectionValues;
  meshConfig: MeshConfig;
}

export function injectorState(
  configText: string,
  valuesText: string,
  meshConfig: MeshConfig,
  where: string,
  env: Readonly<Record<string, string | undefined>>,
): InjectorState {
  const config = parseInjectConfig(configText, `${where} config`);
  return { config, templates: parseTemplates(config.templates, env), values: parseValues(valuesText, `${where} values`), meshConfig };
}

export interface AdmissionAnswer {
  allowed: boolean;
  patch?: string;
  patchType?: 'JSONPatch';
  status?: { metadata: Record<string, never>; message: string };
}

/** Istio's Webhook.inject: the answer for one AdmissionRequest's pod. */
export function admitPod(
  state: InjectorState,
  request: { namespace: string; object: unknown },
  o: { revision: string; urlPath: string; env: Readonly<Record<string, string | undefined>> },
): { answer: AdmissionAnswer; outcome: 'injected' | 'skipped' | 'failed' } {
  let pod: JsonObject;
  try {
    const raw = { ...(request.object as JsonObject) };
    const metadata = { ...((raw.metadata as JsonObject) ?? {}) };
    // Managed fields do not change the result and can be large (Istio drops them too).
    delete metadata.managedFields;
    if (!metadata.namespace) metadata.namespace = request.namespace;
    raw.metadata = metadata;
    pod = normalizePod(raw);
  } catch (e) {
    const message = `Could not unmarshal raw object: ${(e as Error).message}`;
    log.error(message);
    return { answer: { allowed: false, status: { metadata: {}, message } }, outcome: 'failed' };
  }
  const m = (pod.metadata ?? {}) as JsonObject;
  const name = String(m.name || (m.generateName ? `${String(m.generateName)}***` : ''));
  const who = `${String(m.namespace)}/${name}`;
  log.info(`Process sidecar injection request for ${who}`);
  if (!injectRequired(state.config, pod)) {
    log.info(`Skipping ${who} due to policy check`);
    return { answer: { allowed: true }, outcome: 'skipped' };
  }
  try {
    const { deploy, typeMeta } = deployMetaFromPod(pod);
    const injected = injectWorkloadPod(pod, deploy, typeMeta, {
      templates: state.templates,
      values: state.values,
      revision: o.revision,
      meshConfig: podMeshConfig(state.meshConfig, pod),
      env: o.env,
      defaultTemplates: state.config.defaultTemplates,
      aliases: state.config.aliases,
      injectedAnnotations: state.config.injectedAnnotations,
      proxyEnvs: parseInjectEnvs(o.urlPath),
    });
    const patch = createJsonPatch(pod, injected);
    return { answer: { allowed: true, patch: Buffer.from(JSON.stringify(patch)).toString('base64'), patchType: 'JSONPatch' }, outcome: 'injected' };
  } catch (e) {
    if (!(e instanceof InjectionError || e instanceof MeshConfigError)) throw e;
    const message = e.message;
    log.error(`Pod injection failed for ${who}: ${message}`);
    return { answer: { allowed: false, status: { metadata: {}, message } }, outcome: 'failed' };
  }
}

export interface InjectionWebhookOptions {
  /** INJECT_ENABLED. */
  enabled: boolean;
  /** REVISION ('' = default). */
  revision: string;
  /** The daemon's namespace, where the injector ConfigMap lives. */
  namespace: string;
  /** --meshConfig. */
  meshConfigFile: string;
  /** The orchestrator client, when there is a cluster. */
  client?: OrchClient;
  /** Working directory the injection directory is under (the daemon's). */
  cwd?: string;
  env: Readonly<Record<string, string | undefined>>;
}

/** The injector of a running daemon, and the HTTP handler serving it. */
export class InjectionWebhook {
  private state: InjectorState | undefined;
  private informer: ResourceInformer | undefined;
  private unwatchMesh: () => void = () => undefined;

  private constructor(private readonly o: InjectionWebhookOptions) {}

  /** Istio's initSidecarInjector: undefined when injection is off or has no configuration. */
  static async start(o: InjectionWebhookOptions): Promise<InjectionWebhook | undefined> {
    if (!o.enabled) {
      log.info('Skipping sidecar injector, injection path is missing or disabled.');
      return undefined;
    }
    const wh = new InjectionWebhook(o);
    const meshConfig = wh.meshConfig();
    const dir = path.resolve(o.cwd ?? process.cwd(), INJECTION_DIRECTORY);
    const configFile = path.join(dir, 'config');
    if (fs.existsSync(configFile)) {
      const valuesFile = path.join(dir, 'values');
      wh.state = injectorState(
        fs.readFileSync(configFile, 'utf8'),
        fs.existsSync(valuesFile) ? fs.readFileSync(valuesFile, 'utf8') : '',
        meshConfig,
        dir,
        o.env,
      );
      log.info(`initializing sidecar injector from ${dir}`);
      wh.followMeshConfig();
      return wh;
    }
    if (!o.client) {
      log.info('Skipping sidecar injector, template not found');
      return undefined;
    }
    const name = o.revision && o.revision !== 'default' ? `${INJECTOR_CONFIGMAP}-${o.revision}` : INJECTOR_CONFIGMAP;
    const cmPath = `/api/v1/namespaces/${encodeURIComponent(o.namespace)}/configmaps`;
    try {
      const cm = (await o.client.getJson(`${cmPath}/${encodeURIComponent(name)}`)) as RawObject;
      wh.configMapChanged(cm, meshConfig);
    } catch (e) {
      if (e instanceof OrchApiError && e.statusCode === 404) {
        log.info('Skipping sidecar injector, template not found');
        return undefined;
      }
      throw e;
    }
    wh.informer = new ResourceInformer(
      o.client,
      { path: cmPath, fieldSelector: `metadata.name=${name}`, log },
      {
        add: (x) => wh.configMapChanged(x, wh.meshConfig()),
        update: (x) => wh.configMapChanged(x, wh.meshConfig()),
        delete: () => log.warn(`ConfigMap ${o.namespace}/${name} deleted: injecting with the last configuration`),
      },
    );
    wh.informer.start();
    log.info(`initializing sidecar injector from ConfigMap ${o.namespace}/${name}`);
    wh.followMeshConfig();
    return wh;
  }

  private meshConfig(): MeshConfig {
    const f = this.o.meshConfigFile;
    if (!f || !fs.existsSync(f)) return defaultMeshConfig();
    return readMeshConfig(fs.readFileSync(f, 'utf8'), f);
  }

  /** Istio's webhook follows mesh config changes: the next pods are injected with the new one. */
  private followMeshConfig(): void {
    const f = this.o.meshConfigFile;
    const dir = path.dirname(path.resolve(f || '.'));
    if (!f || !fs.existsSync(dir)) return;
    const read = () => {
      try {
        return fs.readFileSync(f, 'utf8');
      } catch {
        return '';
      }
    };
    let text = read();
    let timer: NodeJS.Timeout | undefined;
    const reload = () => {
      timer = undefined;
      const next = read();
      if (next === text || !this.state) return;
      text = next;
      try {
        this.state = { ...this.state, meshConfig: this.meshConfig() };
        log.info(`injecting with the changed mesh config ${f}`);
      } catch (e) {
        log.error(`${(e as Error).message}; injecting with the previous mesh config`);
      }
    };
    try {
      // The directory, not the file: a mounted ConfigMap changes by swapping a symlink.
      const watcher = fs.watch(dir, { persistent: false }, () => {
        if (timer) clearTimeout(timer);
        timer = setTimeout(reload, 100);
      });
      this.unwatchMesh = () => {
        if (timer) clearTimeout(timer);
        watcher.close();
      };
    } catch (e) {
      log.warn(`mesh config ${f} is not followed: ${(e as Error).message}`);
    }
  }

  /** A new injector ConfigMap; a broken one is refused and the last good configuration stays. */
  private configMapChanged(cm: RawObject, meshConfig: MeshConfig): void {
    const data = (cm.data ?? {}) as Record<string, string>;
    const where = `ConfigMap ${String(cm.metadata.namespace)}/${String(cm.metadata.name)}`;
    try {
      this.state = injectorState(data.config ?? '', data.values ?? '', meshConfig, where, this.o.env);
      log.info(`sidecar injector configuration from ${where} (resourceVersion ${String(cm.metadata.resourceVersion)})`);
    } catch (e) {
      const message = `${where}: ${(e as Error).message}`;
      if (!this.state) throw new Error(message);
      log.error(`${message}; keeping the last good injector configuration`);
    }
  }

  async stop(): Promise<void> {
    this.unwatchMesh();
    await this.informer?.stop();
  }

  /** `/inject` and `/inject/…`. */
  /** The configuration injection works from now (the gateway deployment controller renders its templates). */
  current(): InjectorState | undefined {
    return this.state;
  }

  handler() {
    return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
      requests.inc();
      let body: Buffer;
      try {
        body = await readBody(req);
      } catch (e) {
        failures.inc();
        writeText(res, 400, `${(e as Error).message}\n`);
        return;
      }
      if (body.length === 0) {
        failures.inc();
        log.error('no body found');
        writeText(res, 400, 'no body found\n');
        return;
      }
      if (req.headers['content-type'] !== 'application/json') {
        failures.inc();
        log.error(`contentType=${req.headers['content-type'] ?? ''}, expect application/json`);
        writeText(res, 415, 'invalid Content-Type, want `application/json`\n');
        return;
      }
      // Go's r.URL.Path: percent-escapes (`%2F` included) decoded.
      let urlPath = new URL(req.url ?? '/', 'http://x').pathname;
      try {
        urlPath = decodeURIComponent(urlPath);
      } catch {
        // not valid escapes: use the path as sent
      }
      const decoded = decodeReview(body.toString('utf8'));
      if ('denial' in decoded) {
        failures.inc();
        writeText(res, 200, JSON.stringify(decoded.denial), 'application/json');
        return;
      }
      const { kind, apiVersion, request } = decoded;
      let answer: AdmissionAnswer;
      try {
        const r = admitPod(this.state!, request, { revision: this.o.revision, urlPath, env: this.o.env });
        answer = r.answer;
        if (r.outcome === 'failed') failures.inc();
        else if (r.outcome === 'skipped') skips.inc();
        else successes.inc();
      } catch (e) {
        failures.inc();
        log.error(`Pod injection failed: ${(e as Error).stack ?? String(e)}`);
        answer = deny(`injection failed: ${(e as Error).message}`);
      }
      writeText(res, 200, JSON.stringify({ kind, apiVersion, response: { ...answer, uid: request.uid } }), 'application/json');
    };
  }
}
