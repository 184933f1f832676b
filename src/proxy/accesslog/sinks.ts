// Where file access logs go (envoy.access_loggers.file / stdout / stderr): one append stream per path, shared by
// every logger that names it (Envoy's AccessLogManager keeps one file per path), written asynchronously.
// /dev/stdout and /dev/stderr are the process's own streams, as Envoy's are. A path that cannot be opened refuses
// the config, as Envoy's "unable to open file" does.
import fs from 'node:fs';
import { ConfigError } from '../common/config-error';

export type Sink = (line: string) => void;

const files = new Map<string, Sink>();

export const stdoutSink: Sink = (l) => void process.stdout.write(l);
export const stderrSink: Sink = (l) => void process.stderr.write(l);

export function sinkFor(path: string, where: string): Sink {
  if (path === '/dev/stdout') return stdoutSink;
  if (path === '/dev/stderr') return stderrSink;
  let s = files.get(path);
  if (!s) {
    let fd: number;
    try {
      fd = fs.openSync(path, 'a');
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      throw new ConfigError(`${where}: unable to open file '${path}': ${err.code ?? err.message}`);
    }
    const stream = fs.createWriteStream(path, { fd });
    stream.on('error', () => {});
    s = (l) => void stream.write(l);
    files.set(path, s);
  }
  return s;
}
