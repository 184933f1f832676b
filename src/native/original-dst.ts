// The destination a captured connection was really for, as Envoy's original_dst listener filter reads
// it: SO_ORIGINAL_DST (SOL_IP) / IP6T_SO_ORIGINAL_DST (SOL_IPV6) after an iptables REDIRECT; when the
// kernel has no NAT record (TPROXY, or a connection that was not redirected) the socket's own local
// address is the destination. Node exposes neither option, so a small N-API addon (original_dst.c)
// does the getsockopt; the same addon makes the transparent upstream sockets of the original_src filter
// (IP_TRANSPARENT + SO_MARK before bind: proxy/upstream/source.ts). It is compiled at build time and found:
//   - in the single executable, as the SEA asset `original_dst.node` (written to a private temporary
//     file and loaded from there: dlopen needs a file);
//   - beside the bundle (`node dist/mesh.cjs` loads dist/original_dst.node);
//   - at an explicit path (tests).
// Without it, capture still works in a degraded way (the engine routes by Host / SNI) and says so.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type net from 'node:net';
import { seaAssets, type SeaAssets } from '../lib/sea';

export const ADDON_FILE = 'original_dst.node';

export interface Destination {
  address: string;
  port: number;
}

interface Binding extends Partial<MemoryBinding> {
  originalDst(fd: number): Destination | number;
  setTransparent(fd: number, ipv6: boolean): number;
  dupFd?(fd: number): number;
  transparentSocket?(source: string, mark: number): number | { errno: number; step: string };
}

/** memory.cc's functions, built into the same addon (src/proxy/common/memory-relief.ts uses them). */
export interface MemoryBinding {
  /** V8's critical memory-pressure GC (compacts, shrinks the young generation, frees heap pages), then malloc_trim. */
  releaseMemory(): void;
  /**
   * Drops this process's mappings of its executable's clean read-only pages (they stay in the page cache; what is
   * still used faults back in); the bytes of address space advised.
   */
  releaseExecutablePages(): number;
}

export interface OriginalDstSource {
  /** Where the addon came from (for the log). */
  readonly from: string;
  /**
   * The destination the connection was NATed from, or undefined when the kernel has no NAT record
   * for it (TPROXY, or not redirected): then the socket's local address is the destination.
   */
  read(socket: net.Socket): Destination | undefined;
  /** IP_TRANSPARENT / IPV6_TRANSPARENT on a listening socket (TPROXY); the errno text on failure. */
  setTransparent(server: net.Server, ipv6: boolean): string | undefined;
  /**
   * A second descriptor of a listening socket, for an engine worker thread to listen on (closing it
   * leaves the socket open for the others); undefined when this addon build has no dupFd.
   */
  readonly dupFd?: ((fd: number) => number) | undefined;
  /**
   * A new, unconnected TCP socket (its descriptor) bound to `source` port 0 with IP_TRANSPARENT and, when
   * `mark` is not 0, SO_MARK = mark: what Envoy's original_src filter gives an upstream socket. Throws an
   * Error (with `code`, e.g. EPERM) naming the step that failed; undefined in an addon built without it.
   */
  readonly transparentSocket?: ((source: string, mark: number) => number) | undefined;
}

export type AddonLoad = { ok: true; source: OriginalDstSource; memory?: MemoryBinding | undefined } | { ok: false; reason: string };

const ERRNO: Record<number, string> = {
  1: 'EPERM',
  2: 'ENOENT',
  9: 'EBADF',
  13: 'EACCES',
  22: 'EINVAL',
  23: 'ENFILE',
  24: 'EMFILE',
  92: 'ENOPROTOOPT',
  95: 'EOPNOTSUPP',
  97: 'EAFNOSUPPORT',
  98: 'EADDRINUSE',
  99: 'EADDRNOTAVAIL',
};
const errnoName = (n: number) => ERRNO[n] ?? `errno ${n}`;

function fdOf(handleOwner: unknown): number | undefined {
  const fd = (handleOwner as { _handle?: { fd?: number } } | undefined)?._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : undefined;
}

function sourceFrom(b: Binding, from: string): OriginalDstSource {
  return {
    from,
    read(socket) {
      const fd = fdOf(socket);
      if (fd === undefined) return undefined;
      const r = b.originalDst(fd);
      return typeof r === 'number' ? undefined : r;
    },
    setTransparent(server, ipv6) {
      const fd = fdOf(server);
      if (fd === undefined) return 'the listening socket has no file descriptor';
      const r = b.setTransparent(fd, ipv6);
      return r === 0 ? undefined : `${ipv6 ? 'IPV6_TRANSPARENT' : 'IP_TRANSPARENT'}: ${errnoName(r)}${r === 1 ? ' (needs CAP_NET_ADMIN)' : ''}`;
    },
    dupFd: b.dupFd
      ? (fd) => {
          const r = b.dupFd!(fd);
          if (r < 0) throw new Error(`cannot duplicate descriptor ${fd}: ${errnoName(-r)}`);
          return r;
        }
      : undefined,
    transparentSocket: b.transparentSocket
      ? (source, mark) => {
          const r = b.transparentSocket!(source, mark);
          if (typeof r === 'number') return r;
          const code = errnoName(r.errno);
          // IP_TRANSPARENT needs CAP_NET_ADMIN or CAP_NET_RAW, SO_MARK CAP_NET_ADMIN: Istio runs a TPROXY sidecar with NET_ADMIN
          const hint = r.errno === 1 ? ' (needs CAP_NET_ADMIN)' : '';
          throw Object.assign(new Error(`${r.step}: ${code}${hint}`), { code, errno: r.errno, syscall: r.step });
        }
      : undefined,
  };
}

function loaded(b: Binding, from: string): AddonLoad {
  const memory =
    b.releaseMemory && b.releaseExecutablePages ? { releaseMemory: b.releaseMemory, releaseExecutablePages: b.releaseExecutablePages } : undefined;
  return { ok: true, source: sourceFrom(b, from), memory };
}

function dlopen(file: string): Binding {
  const m = { exports: {} as Binding };
  process.dlopen(m, file);
  if (typeof m.exports.originalDst !== 'function' || typeof m.exports.setTransparent !== 'function') {
    throw new Error(`${file} is not the original-destination addon`);
  }
  return m.exports;
}

/** Loads the addon from a file. */
export function loadAddonFile(file: string): AddonLoad {
  if (!fs.existsSync(file)) return { ok: false, reason: `${file} does not exist (node build.mjs compiles it)` };
  try {
    return loaded(dlopen(file), file);
  } catch (e) {
    return { ok: false, reason: `cannot load ${file}: ${(e as Error).message}` };
  }
}

/**
 * dlopen needs a file: the asset is written to a directory only we can write to (nobody can swap the
 * file between writing and loading it), loaded, and removed. The temp directory first; where it is
 * mounted noexec, the working directory (the proxy's own, e.g. /etc/istio/proxy in a pod).
 */
function loadFromSea(s: SeaAssets): AddonLoad {
  let bytes: ArrayBuffer;
  try {
    bytes = s.getAsset(ADDON_FILE);
  } catch {
    return { ok: false, reason: 'this executable was built without the original-destination addon (it could not be compiled at build time)' };
  }
  const errors: string[] = [];
  for (const base of [...new Set([os.tmpdir(), process.cwd()])]) {
    let dir: string | undefined;
    try {
      dir = fs.mkdtempSync(path.join(base, 'mesh-native-'));
      const file = path.join(dir, ADDON_FILE);
      fs.writeFileSync(file, new Uint8Array(bytes), { mode: 0o500 });
      return loaded(dlopen(file), `executable asset ${ADDON_FILE}`);
    } catch (e) {
      errors.push(`in ${base}: ${(e as Error).message}`);
    } finally {
      // the loaded library stays mapped after its file is gone
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  return { ok: false, reason: `cannot load the embedded addon (${errors.join('; ')})` };
}

let cached: AddonLoad | undefined;

/** The addon for this process (loaded once): embedded, else beside the running script. */
export function originalDstAddon(): AddonLoad {
  if (cached) return cached;
  const s = seaAssets();
  if (s) return (cached = loadFromSea(s));
  let script = process.argv[1] ?? '';
  try {
    script = fs.realpathSync(script);
  } catch {
    // as given
  }
  return (cached = loadAddonFile(path.join(path.dirname(script), ADDON_FILE)));
}
