// Process resource readings from /proc (Linux): resident memory and CPU time of one pid, and a sampler
// that keeps the maximum RSS seen.
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

let ticks;
/** Clock ticks per second (USER_HZ) for /proc/<pid>/stat times. */
function clockTicks() {
  if (ticks === undefined) {
    try {
      ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticks = 100;
    }
  }
  return ticks;
}

/** VmRSS in bytes, or undefined when the process is gone. */
export function rssBytes(pid) {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** utime + stime in seconds, or undefined when the process is gone. */
export function cpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name (which may contain spaces); utime and stime are the
    // 14th and 15th fields of the whole line, the 12th and 13th after the name.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) / clockTicks();
  } catch {
    return undefined;
  }
}

/**
 * Samples RSS every `intervalMs`; `max` is the largest seen since the last reset. `onOverLimit(bytes)` is
 * called (once) when a sample passes `limitBytes`.
 */
export class RssSampler {
  constructor(pid, intervalMs = 100, limitBytes = Infinity, onOverLimit = () => {}) {
    this.pid = pid;
    this.max = rssBytes(pid) ?? 0;
    this.limitBytes = limitBytes;
    this.onOverLimit = onOverLimit;
    this.peak = this.max; // never reset
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
  }

  sample() {
    const r = rssBytes(this.pid);
    if (r !== undefined && r > this.max) this.max = r;
    if (r !== undefined && r > this.peak) this.peak = r;
    if (r !== undefined && r > this.limitBytes && this.onOverLimit) {
      const cb = this.onOverLimit;
      this.onOverLimit = undefined;
      cb(r);
    }
    return r;
  }

  reset() {
    this.max = rssBytes(this.pid) ?? 0;
  }

  stop() {
    clearInterval(this.timer);
  }
}
