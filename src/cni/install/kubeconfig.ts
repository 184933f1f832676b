// The client configuration install-cni writes for the plugin (Istio's cni/pkg/install/kubeconfig.go): the
// API server the installer's pod sees, the CA it trusts and its service account token, in the run dir
// the plugin reads (<cni-agent-run-dir>/mesh-cni-kubeconfig) with --orchconfig-mode.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import YAML from 'yaml';
import { registerScope } from '../../lib/log';
import { PLUGIN_KUBECONFIG_NAME } from '../plugin/config';
import { atomicWrite } from './files';
import { joinHostPort } from '../../lib/hostport';

const log = registerScope('cni-agent', 'CNI agent');

export interface KubeconfigSettings {
  /** KUBERNETES_SERVICE_HOST / _PORT / _PROTOCOL of the installer's pod. */
  serviceHost: string;
  servicePort: string;
  serviceProtocol: string;
  /** --orch-ca-file; empty = the service account's ca.crt. */
  orchCAFile: string;
  skipTLSVerify: boolean;
  /** Directory holding the service account's `token` (and `ca.crt`). */
  serviceAccountPath: string;
}

export class KubeconfigError extends Error {
  override name = 'KubeconfigError';
}

const CONTEXT = 'mesh-cni-context';
const CLUSTER = 'local';
const USER = 'mesh-cni';

/** The file's text: kubeconfig v1 with keys sorted, as client-go's serialisation through sigs.k8s.io/yaml. */
export async function createKubeconfig(s: KubeconfigSettings): Promise<{ full: string; redacted: string }> {
  if (!s.serviceHost) throw new KubeconfigError('KUBERNETES_SERVICE_HOST not set. Is this not running within a pod?');
  if (!s.servicePort) throw new KubeconfigError('KUBERNETES_SERVICE_PORT not set. Is this not running within a pod?');
  const cluster: Record<string, unknown> = { server: `${s.serviceProtocol || 'https'}://${joinHostPort(s.serviceHost, s.servicePort)}` };
  if (s.skipTLSVerify) {
    cluster['insecure-skip-tls-verify'] = true;
  } else {
    const caFile = s.orchCAFile || path.join(s.serviceAccountPath, 'ca.crt');
    let ca: Buffer;
    try {
      ca = await readFile(caFile);
    } catch (e) {
      throw new KubeconfigError(`${s.orchCAFile ? '--orch-ca-file' : 'service account CA'} ${caFile}: ${(e as Error).message}`);
    }
    cluster['certificate-authority-data'] = ca.toString('base64');
  }
  const tokenFile = path.join(s.serviceAccountPath, 'token');
  let token: string;
  try {
    token = await readFile(tokenFile, 'utf8');
  } catch (e) {
    throw new KubeconfigError(`service account token ${tokenFile}: ${(e as Error).message}`);
  }
  const doc = (c: Record<string, unknown>, tok: string) => ({
    apiVersion: 'v1',
    clusters: [{ cluster: c, name: CLUSTER }],
    contexts: [{ context: { cluster: CLUSTER, user: USER }, name: CONTEXT }],
    'current-context': CONTEXT,
    kind: 'Config',
    preferences: {},
    users: [{ name: USER, user: { token: tok } }],
  });
  const render = (v: unknown) => YAML.stringify(v, { indentSeq: false, lineWidth: 0, sortMapEntries: true });
  const redactedCluster = { ...cluster };
  if (redactedCluster['certificate-authority-data']) redactedCluster['certificate-authority-data'] = 'REDACTED';
  return { full: render(doc(cluster, token)), redacted: render(doc(redactedCluster, 'REDACTED')) };
}

/** Writes (replaces) the plugin's client configuration; only the plugin reads it, so no merge is needed. */
export async function writeKubeconfigFile(s: KubeconfigSettings, runDir: string, mode: number): Promise<string> {
  const kc = await createKubeconfig(s);
  const file = path.join(runDir, PLUGIN_KUBECONFIG_NAME);
  await atomicWrite(file, kc.full, mode);
  log.info(`wrote kubeconfig file ${file} with: \n${kc.redacted}`);
  return file;
}
