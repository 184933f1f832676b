// The real Kubernetes API server of ../shared/kube (see its README), started once per test file.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import type { Test } from 'tap';
import { SHARED } from './spec';

export interface Kube {
  kubeconfig: string;
  dir: string;
  env: Record<string, string>;
  /** `https://127.0.0.1:<port>` */
  url: string;
  port: number;
  /** A request as the cluster admin; JSON in and out, non-2xx answers rejected with the Status message. */
  request(method: string, p: string, body?: unknown, contentType?: string): Promise<any>;
  stop(): void;
}

export function kubeUnavailable(): string | false {
  try {
    execFileSync(path.join(SHARED, 'kube', 'start'), ['--help'], { stdio: 'ignore', timeout: 10_000 });
    return false;
  } catch (e) {
    return `../shared/kube/start is not usable here: ${(e as Error).message}`;
  }
}

/** Starts an API server (etcd + kube-apiserver; no controller manager or CRDs unless asked) and stops it in teardown. */
export function startKube(t: Test, args: string[] = ['--no-controller-manager', '--with-crds', 'none']): Kube {
  const kubeDir = path.join(SHARED, 'kube');
  const out = execFileSync(path.join(kubeDir, 'start'), ['--owner', String(process.pid), ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    timeout: 180_000,
  });
  const kubeconfig = out.trim().split('\n').pop()!;
  const dir = path.dirname(kubeconfig);
  const env = Object.fromEntries(
    readFileSync(path.join(dir, 'env'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  ) as Record<string, string>;
  const url = env.API_URL!;
  const ca = readFileSync(env.KUBE_CA!);
  const request = (method: string, p: string, body?: unknown, contentType = 'application/json') =>
    new Promise<any>((resolve, reject) => {
      const data = body === undefined ? undefined : JSON.stringify(body);
      const req = https.request(
        url + p,
        { method, ca, headers: { Authorization: `Bearer ${env.KUBE_TOKEN}`, Accept: 'application/json', ...(data ? { 'Content-Type': contentType } : {}) } },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d) => (text += d));
          res.on('end', () => {
            let parsed: any = text;
            try {
              parsed = JSON.parse(text);
            } catch {
              // not JSON
            }
            if ((res.statusCode ?? 0) >= 300) reject(new Error(`${method} ${p}: ${res.statusCode} ${parsed?.message ?? text}`));
            else resolve(parsed);
          });
        },
      );
      req.on('error', reject);
      req.end(data);
    });
  const kube: Kube = {
    kubeconfig,
    dir,
    env,
    url,
    port: Number(new URL(url).port),
    request,
    stop: () => execFileSync(path.join(kubeDir, 'stop'), [dir], { stdio: 'inherit' }),
  };
  t.teardown(() => kube.stop());
  return kube;
}

/** A client configuration with the admin's bearer token, in the shape install-cni writes for the plugin. */
export function tokenKubeconfig(kube: Kube, server = kube.url): string {
  const ca = readFileSync(kube.env.KUBE_CA!).toString('base64');
  return [
    'apiVersion: v1',
    'clusters:',
    '- cluster:',
    `    certificate-authority-data: ${ca}`,
    `    server: ${server}`,
    '  name: local',
    'contexts:',
    '- context:',
    '    cluster: local',
    '    user: mesh-cni',
    '  name: mesh-cni-context',
    'current-context: mesh-cni-context',
    'kind: Config',
    'preferences: {}',
    'users:',
    '- name: mesh-cni',
    '  user:',
    `    token: ${kube.env.KUBE_TOKEN}`,
    '',
  ].join('\n');
}
