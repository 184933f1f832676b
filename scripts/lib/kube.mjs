// The private Kubernetes API server of ../shared/kube as the bench scripts use it: where it is, a small
// admin REST client (the admin client certificate of the instance's env file) and a bounded pool for
// populating it. Tests have their own in test/helpers/kube.ts; the code under test has its own client.
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

export function kubeDir() {
  for (const c of [path.resolve(ROOT, '../shared/kube'), '/work/shared/kube']) {
    try {
      readFileSync(path.join(c, 'start'));
      return c;
    } catch {
      // next
    }
  }
  throw new Error('../shared/kube not found beside the checkout');
}

export class Api {
  constructor(env, concurrency) {
    this.url = env.API_URL;
    this.agent = new https.Agent({
      ca: readFileSync(env.KUBE_CA),
      cert: readFileSync(env.KUBE_CLIENT_CERT),
      key: readFileSync(env.KUBE_CLIENT_KEY),
      keepAlive: true,
      maxSockets: concurrency,
    });
    this.requests = 0;
  }

  request(method, p, body, contentType = 'application/json') {
    this.requests++;
    return new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const req = https.request(
        new URL(this.url + p),
        { method, agent: this.agent, headers: payload ? { 'content-type': contentType } : {} },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d) => (text += d));
          res.on('end', () =>
            res.statusCode >= 200 && res.statusCode < 300
              ? resolve(text)
              : reject(new Error(`${method} ${p}: ${res.statusCode} ${text.slice(0, 300)}`)),
          );
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }
}

/** Runs `tasks` (functions returning promises) `limit` at a time. */
export async function pool(tasks, limit) {
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) await tasks[next++]();
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker));
}

/** The instance's `DIR/env` (KEY=value lines: API_URL, KUBE_CA, KUBE_CLIENT_CERT…). */
export function readEnv(dir) {
  return Object.fromEntries(
    readFileSync(path.join(dir, 'env'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
}
