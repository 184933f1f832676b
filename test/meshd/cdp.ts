// A minimal Chrome DevTools Protocol client for headless Chromium, over --remote-debugging-pipe (fd 3 for
// commands, fd 4 for replies and events, NUL-terminated JSON): no WebSocket and no extra npm package.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Readable, Writable } from 'node:stream';

export interface CdpEvent {
  method: string;
  params: Record<string, unknown>;
  sessionId?: string;
}

/** The Chromium binary, or undefined when it is not installed. */
export function findChromium(): string | undefined {
  for (const name of ['chromium', 'chromium-browser']) {
    const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim()) return r.stdout.trim();
  }
  return undefined;
}

export class Cdp {
  private nextId = 0;
  private buffer = '';
  private readonly pending = new Map<number, { resolve: (v: Record<string, unknown>) => void; reject: (e: Error) => void; method: string }>();
  readonly events: CdpEvent[] = [];
  private stderr = '';

  private constructor(
    private readonly child: ChildProcess,
    private readonly userDataDir: string,
  ) {
    const out = child.stdio[3] as Writable;
    const inp = child.stdio[4] as Readable;
    out.on('error', () => {});
    child.stderr?.on('data', (d) => (this.stderr = (this.stderr + d).slice(-4000)));
    inp.on('data', (d: Buffer) => {
      this.buffer += d.toString('utf8');
      let i;
      while ((i = this.buffer.indexOf('\u0000')) >= 0) {
        const msg = JSON.parse(this.buffer.slice(0, i)) as {
          id?: number;
          result?: Record<string, unknown>;
          error?: { message: string };
          method?: string;
          params?: Record<string, unknown>;
          sessionId?: string;
        };
        this.buffer = this.buffer.slice(i + 1);
        if (msg.id !== undefined) {
          const p = this.pending.get(msg.id);
          this.pending.delete(msg.id);
          if (msg.error) p?.reject(new Error(`${p.method}: ${msg.error.message}`));
          else p?.resolve(msg.result ?? {});
        } else if (msg.method) {
          this.events.push({ method: msg.method, params: msg.params ?? {}, sessionId: msg.sessionId });
        }
      }
    });
    child.on('exit', () => {
      for (const p of this.pending.values()) p.reject(new Error(`chromium exited during ${p.method}; stderr: ${this.stderr}`));
      this.pending.clear();
    });
  }

  static launch(binary: string): Cdp {
    const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'meshd-chromium-'));
    const child = spawn(
      binary,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--disable-dev-shm-usage',
        `--user-data-dir=${userDataDir}`,
        '--remote-debugging-pipe',
        'about:blank',
      ],
      { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] },
    );
    return new Cdp(child, userDataDir);
  }

  send(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<Record<string, unknown>> {
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, method });
      (this.child.stdio[3] as Writable).write(JSON.stringify(sessionId ? { id, method, params, sessionId } : { id, method, params }) + '\u0000');
    });
  }

  /** Opens `url` in a new tab, with script exceptions recorded from the start; returns the session. */
  async open(url: string): Promise<string> {
    const { targetId } = (await this.send('Target.createTarget', { url: 'about:blank' })) as { targetId: string };
    const { sessionId } = (await this.send('Target.attachToTarget', { targetId, flatten: true })) as { sessionId: string };
    await this.send('Runtime.enable', {}, sessionId);
    await this.send('Page.enable', {}, sessionId);
    const nav = (await this.send('Page.navigate', { url }, sessionId)) as { errorText?: string };
    if (nav.errorText) throw new Error(`navigating to ${url}: ${nav.errorText}`);
    return sessionId;
  }

  /** Evaluates an expression in the page and returns its JSON value; page exceptions reject. */
  async evaluate<T>(sessionId: string, expression: string): Promise<T> {
    const r = (await this.send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true }, sessionId)) as {
      result: { value?: T };
      exceptionDetails?: { text: string; exception?: { description?: string } };
    };
    if (r.exceptionDetails) throw new Error(`page: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
    return r.result.value as T;
  }

  async close(): Promise<void> {
    const exited = new Promise<void>((r) => (this.child.exitCode !== null ? r() : this.child.once('exit', () => r())));
    await Promise.race([this.send('Browser.close').catch(() => {}), new Promise((r) => setTimeout(r, 3000))]);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
    fs.rmSync(this.userDataDir, { recursive: true, force: true });
  }
}
