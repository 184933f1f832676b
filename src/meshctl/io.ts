// File input and output for meshctl commands: Go-style error texts naming the file, stdin for "-", and
// output files written only once the whole result exists (nothing partial on failure).
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CommandError } from '../cli/context';

function errnoText(e: NodeJS.ErrnoException): string {
  switch (e.code) {
    case 'ENOENT':
      return 'no such file or directory';
    case 'EACCES':
      return 'permission denied';
    case 'EISDIR':
      return 'is a directory';
    case 'ENOTDIR':
      return 'not a directory';
    default:
      return e.message;
  }
}

/** Reads `file` ("-" is stdin); fails with Go's `open <file>: <reason>`. */
export function readInput(file: string, stdin: NodeJS.ReadableStream | number = 0): string {
  try {
    if (file === '-') return readFileSync(typeof stdin === 'number' ? stdin : 0, 'utf8');
    return readFileSync(file, 'utf8');
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'EISDIR') throw new CommandError(`read ${file}: is a directory`);
    if (err.code) throw new CommandError(`open ${file}: ${errnoText(err)}`);
    throw e;
  }
}

/** Writes `text` to `file` through a temporary file renamed into place. */
export function writeOutputFile(file: string, text: string): void {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  try {
    writeFileSync(tmp, text);
    renameSync(tmp, file);
  } catch (e) {
    rmSync(tmp, { force: true });
    const err = e as NodeJS.ErrnoException;
    if (err.code) throw new CommandError(`open ${file}: ${errnoText(err)}`);
    throw e;
  }
}
