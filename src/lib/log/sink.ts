// Output sinks. stdout/stderr and files are written with fs.writeSync, so every line is out of the process
// before the call returns and a following process.exit() loses nothing.

import * as fs from 'node:fs';

export interface LogSink {
  /** Writes one encoded entry (ends with a newline). Throws on failure. */
  write(text: string): void;
  /** Flushes to stable storage where that means something (files). */
  sync?(): void;
  /** Releases the sink; stdout/stderr sinks do nothing. */
  close?(): void;
}

const sleepCell = new Int32Array(new SharedArrayBuffer(4));

function writeAll(fd: number, text: string): void {
  const buf = Buffer.from(text, 'utf8');
  let off = 0;
  let spins = 0;
  while (off < buf.length) {
    try {
      off += fs.writeSync(fd, buf, off, buf.length - off);
      spins = 0;
    } catch (err) {
      // A non-blocking pipe or terminal that is full: wait a moment and retry (bounded).
      if ((err as NodeJS.ErrnoException).code === 'EAGAIN' && spins++ < 10_000) {
        Atomics.wait(sleepCell, 0, 0, 1);
        continue;
      }
      throw err;
    }
  }
}

/** A sink over an open file descriptor. */
export class FdSink implements LogSink {
  private closed = false;
  constructor(
    readonly fd: number,
    readonly path: string,
    private readonly owned: boolean,
  ) {}
  write(text: string): void {
    if (this.closed) return;
    writeAll(this.fd, text);
  }
  sync(): void {
    if (!this.owned || this.closed) return;
    try {
      fs.fsyncSync(this.fd);
    } catch {
      // like zap, ignore sync errors of special files
    }
  }
  close(): void {
    if (!this.owned || this.closed) return;
    this.closed = true;
    try {
      fs.closeSync(this.fd);
    } catch {
      // already closed
    }
  }
}

export const stdoutSink: LogSink = new FdSink(1, 'stdout', false);
export const stderrSink: LogSink = new FdSink(2, 'stderr', false);

/** Collects entries in memory; for tests and for programs that capture logs. */
export class MemorySink implements LogSink {
  text = '';
  write(text: string): void {
    this.text += text;
  }
  /** Entries as lines without the trailing newline (a multi-line entry, e.g. with a stack, spans lines). */
  lines(): string[] {
    if (this.text === '') return [];
    return this.text.replace(/\n$/, '').split('\n');
  }
  clear(): void {
    this.text = '';
  }
}

const GO_ERRNO: Readonly<Record<string, string>> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EISDIR: 'is a directory',
  ENOTDIR: 'not a directory',
  EROFS: 'read-only file system',
  ENOSPC: 'no space left on device',
  EMFILE: 'too many open files',
  ELOOP: 'too many levels of symbolic links',
  ENAMETOOLONG: 'file name too long',
};

/** Error of opening a log target, worded like zap's `open sink "<path>": open <path>: <errno text>`. */
export class SinkOpenError extends Error {
  constructor(
    readonly path: string,
    cause: NodeJS.ErrnoException,
  ) {
    const reason = (cause.code && GO_ERRNO[cause.code]) || cause.message;
    super(`open sink ${JSON.stringify(path)}: open ${path}: ${reason}`);
    this.name = 'SinkOpenError';
  }
}

/**
 * Opens one --log_target: `stdout` and `stderr` are the standard streams, anything else is a file opened for
 * appending (created with mode 0666 before umask), like zap.Open.
 */
export function openTarget(target: string): LogSink {
  if (target === 'stdout') return stdoutSink;
  if (target === 'stderr') return stderrSink;
  let path = target;
  if (path.startsWith('file://')) path = decodeURIComponent(new URL(path).pathname);
  try {
    const fd = fs.openSync(path, fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT, 0o666);
    return new FdSink(fd, path, true);
  } catch (err) {
    throw new SinkOpenError(target, err as NodeJS.ErrnoException);
  }
}

/** Opens all targets; on any failure closes what was opened and throws every error joined with "; ". */
export function openTargets(targets: readonly string[]): LogSink[] {
  const sinks: LogSink[] = [];
  const errors: string[] = [];
  for (const t of targets) {
    try {
      sinks.push(openTarget(t));
    } catch (err) {
      errors.push((err as Error).message);
    }
  }
  if (errors.length > 0) {
    for (const s of sinks) s.close?.();
    throw new Error(errors.join('; '));
  }
  return sinks;
}
