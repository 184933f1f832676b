// Go's time.Duration text form, because Istio users type and read durations that way
// (`1m30s`, `100ms`, `2562047h47m16.854775807s`). Internally a duration is a bigint of nanoseconds;
// callers that schedule timers want milliseconds.

const UNIT_NS: Readonly<Record<string, bigint>> = {
  ns: 1n,
  us: 1_000n,
  µs: 1_000n, // U+00B5 micro sign
  μs: 1_000n, // U+03BC Greek mu
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};

const MAX_INT64 = (1n << 63n) - 1n;

export class DurationError extends Error {}

/** Parses like Go's time.ParseDuration; throws DurationError with Go's message. */
export function parseDurationNs(text: string): bigint {
  const orig = text;
  const bad = (): never => {
    throw new DurationError(`time: invalid duration ${goQuote(orig)}`);
  };
  let s = text;
  let neg = false;
  if (s.startsWith('-') || s.startsWith('+')) {
    neg = s[0] === '-';
    s = s.slice(1);
  }
  if (s === '0') return 0n;
  if (s === '') bad();
  let total = 0n;
  while (s !== '') {
    const num = /^([0-9]*)(?:\.([0-9]*))?/.exec(s);
    const intPart = num?.[1] ?? '';
    const fracPart = num?.[2];
    if (intPart === '' && (fracPart === undefined || fracPart === '')) bad();
    s = s.slice(num![0].length);
    const unitMatch = /^[^0-9.]+/.exec(s);
    if (!unitMatch) throw new DurationError(`time: missing unit in duration ${goQuote(orig)}`);
    const unit = unitMatch[0];
    const mult = UNIT_NS[unit];
    if (mult === undefined) throw new DurationError(`time: unknown unit ${goQuote(unit)} in duration ${goQuote(orig)}`);
    s = s.slice(unit.length);
    let v = BigInt(intPart === '' ? '0' : intPart) * mult;
    if (fracPart) {
      // Exact: scale the fraction by the unit, truncating below a nanosecond like Go.
      const scale = 10n ** BigInt(fracPart.length);
      v += (BigInt(fracPart) * mult) / scale;
    }
    total += v;
    if (total > MAX_INT64 + (neg ? 1n : 0n)) bad();
  }
  return neg ? -total : total;
}

export function parseDurationMs(text: string): number {
  return Number(parseDurationNs(text)) / 1e6;
}

/** Formats like Go's Duration.String(). */
export function formatDurationNs(ns: bigint): string {
  if (ns === 0n) return '0s';
  const neg = ns < 0n;
  let u = neg ? -ns : ns;
  let out: string;
  if (u < 1_000_000_000n) {
    // Sub-second: one unit (ns, µs, ms) with a fraction.
    let unit: string;
    let div: bigint;
    if (u < 1_000n) return (neg ? '-' : '') + `${u}ns`;
    if (u < 1_000_000n) {
      unit = 'µs';
      div = 1_000n;
    } else {
      unit = 'ms';
      div = 1_000_000n;
    }
    out = fraction(u, div) + unit;
  } else {
    const h = u / 3_600_000_000_000n;
    u -= h * 3_600_000_000_000n;
    const m = u / 60_000_000_000n;
    u -= m * 60_000_000_000n;
    const secs = fraction(u, 1_000_000_000n) + 's';
    out = h > 0n ? `${h}h${m}m${secs}` : m > 0n ? `${m}m${secs}` : secs;
  }
  return (neg ? '-' : '') + out;
}

export function formatDurationMs(ms: number): string {
  return formatDurationNs(BigInt(Math.round(ms * 1e6)));
}

function fraction(v: bigint, div: bigint): string {
  const whole = v / div;
  const rest = v % div;
  if (rest === 0n) return `${whole}`;
  const digits = div.toString().length - 1;
  const frac = rest.toString().padStart(digits, '0').replace(/0+$/, '');
  return `${whole}.${frac}`;
}

/** Go's %q for the ASCII strings we quote in messages. */
export function goQuote(s: string): string {
  return JSON.stringify(s);
}
