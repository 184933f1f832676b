// Process-wide output state shared by all scopes: encoder, sinks, clock and the exit function used by fatal.
// Replaced wholesale by configure() and by the setters in index.ts.

import * as fs from 'node:fs';
import { formatTimestamp, systemTimeSource, type TimeSource } from './clock';
import { type Encoder, encodeText, type LogEntry } from './format';
import { type LogSink, stdoutSink } from './sink';

/** Exit code after a fatal message: Istio's pkg/log calls os.Exit(1) after writing a fatal entry. */
export const FATAL_EXIT_CODE = 1;

export type ExitFunction = (code: number) => never;

export const defaultExit: ExitFunction = (code) => process.exit(code);

interface Core {
  encoder: Encoder;
  json: boolean;
  sinks: readonly LogSink[];
  clock: TimeSource;
  exit: ExitFunction;
}

export const core: Core = {
  encoder: encodeText,
  json: false,
  sinks: [stdoutSink],
  clock: systemTimeSource,
  exit: defaultExit,
};

/** Encodes and writes one entry to every sink; a failing sink is reported on stderr like Istio does. */
export function writeEntry(e: LogEntry): void {
  const text = core.encoder(e);
  const sinks = core.sinks;
  for (let i = 0; i < sinks.length; i++) {
    try {
      (sinks[i] as LogSink).write(text);
    } catch (err) {
      reportWriteError(err);
    }
  }
}

/** Flushes file sinks (zap syncs after entries above error level, i.e. before a fatal exit). */
export function syncSinks(): void {
  for (const s of core.sinks) {
    try {
      s.sync?.();
    } catch {
      // ignore, like zap's Sync on special files
    }
  }
}

function reportWriteError(err: unknown): void {
  try {
    const msg = err instanceof Error ? err.message : String(err);
    fs.writeSync(2, `${formatTimestamp(systemTimeSource())} log write error: ${msg}\n`);
  } catch {
    // nowhere left to report
  }
}
