// The files a meshctl command reads: paths as given, directories walked (istioctl's filepath.Walk:
// lexical order, symbolic links to directories not followed), `-` for standard input.
import fs from 'node:fs';
import path from 'node:path';

/** The extensions istioctl recognises in directories (and, for analyze, anywhere). */
export const MANIFEST_EXTENSIONS: readonly string[] = ['.json', '.yaml', '.yml'];

export function hasManifestExtension(file: string): boolean {
  return MANIFEST_EXTENSIONS.includes(path.extname(file));
}

/** Every regular file under `dir`, in filepath.Walk order (lexical, depth first). */
export function walkFiles(dir: string): string[] {
  const out: string[] = [];
  const visit = (d: string): void => {
    const names = fs.readdirSync(d).sort();
    for (const name of names) {
      const p = path.join(d, name);
      const st = fs.lstatSync(p);
      if (st.isDirectory()) visit(p);
      else out.push(p);
    }
  };
  visit(dir);
  return out;
}

/** Standard input, read whole (it is a stream only once). */
export function readStdin(): string {
  try {
    return fs.readFileSync(0, 'utf8');
  } catch (e) {
    // An absent or closed stdin reads as empty, as Go's os.Stdin does.
    if ((e as NodeJS.ErrnoException).code === 'EAGAIN' || (e as NodeJS.ErrnoException).code === 'EOF') return '';
    throw e;
  }
}

/** Go's error text for a failed stat/open (`stat x: no such file or directory`). */
export function goFileError(op: string, file: string, e: unknown): string {
  const code = (e as NodeJS.ErrnoException).code;
  const why =
    code === 'ENOENT'
      ? 'no such file or directory'
      : code === 'EACCES'
        ? 'permission denied'
        : code === 'ENOTDIR'
          ? 'not a directory'
          : code === 'EISDIR'
            ? 'is a directory'
            : (e as Error).message;
  return `${op} ${file}: ${why}`;
}
