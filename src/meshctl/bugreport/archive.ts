// The bug-report archive: a gzip'd POSIX tar of regular files under `bug-report/`, as Istio's archive.Create
// writes it (names relative to the directory that holds `bug-report/`, file mode and mtime kept).
import { gzipSync } from 'node:zlib';

export interface ArchiveFile {
  /** Path inside the archive, `/`-separated (e.g. `bug-report/proxies/default/app-0/clusters`). */
  name: string;
  data: Buffer;
  mode?: number;
  mtimeMs?: number;
}

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, '0') + '\0';
}

function header(f: ArchiveFile): Buffer {
  const h = Buffer.alloc(512);
  let name = f.name;
  let prefix = '';
  if (Buffer.byteLength(name) > 100) {
    // ustar: split at a '/' so that the name fits in 100 bytes and the prefix in 155.
    const cut = name.lastIndexOf('/', name.length - 1 - 0);
    let i = cut;
    while (i > 0 && (Buffer.byteLength(name.slice(i + 1)) > 100 || Buffer.byteLength(name.slice(0, i)) > 155)) i = name.lastIndexOf('/', i - 1);
    if (i <= 0) throw new Error(`archive entry name too long: ${name}`);
    prefix = name.slice(0, i);
    name = name.slice(i + 1);
  }
  h.write(name, 0, 100, 'utf8');
  h.write(octal(f.mode ?? 0o644, 8), 100, 8, 'ascii');
  h.write(octal(0, 8), 108, 8, 'ascii');
  h.write(octal(0, 8), 116, 8, 'ascii');
  h.write(octal(f.data.length, 12), 124, 12, 'ascii');
  h.write(octal(Math.floor((f.mtimeMs ?? Date.now()) / 1000), 12), 136, 12, 'ascii');
  h.write('        ', 148, 8, 'ascii');
  h.write('0', 156, 1, 'ascii');
  h.write('ustar\0', 257, 6, 'ascii');
  h.write('00', 263, 2, 'ascii');
  h.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(octal(sum, 7) + ' ', 148, 8, 'ascii');
  return h;
}

/** The tar.gz bytes of `files`, in the order given. */
export function tarGz(files: readonly ArchiveFile[]): Buffer {
  const parts: Buffer[] = [];
  for (const f of files) {
    parts.push(header(f), f.data);
    const pad = (512 - (f.data.length % 512)) % 512;
    if (pad) parts.push(Buffer.alloc(pad));
  }
  parts.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(parts));
}
