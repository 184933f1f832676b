// Scratch directories for tests: made under the system's temp directory and removed in the test's teardown,
// so a failing test leaves nothing behind.
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** A fresh directory `<tmp>/<prefix>XXXXXX`, removed with its contents when `t` ends. */
export function tempDir(t: { teardown(fn: () => unknown): void }, prefix = 'mesh-test-'): string {
  const dir = fs.mkdtempSync(path.join(tmpdir(), prefix));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}
