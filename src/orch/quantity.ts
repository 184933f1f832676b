// Kubernetes resource quantities (k8s.io/apimachinery resource.Quantity): parsing and the canonical text
// the API server and every Go client print ("2000m" → "2", "1024Mi" → "1Gi", "1000" → "1k").

export class QuantityError extends Error {}

type Format = 'DecimalSI' | 'BinarySI' | 'DecimalExponent';

interface Parsed {
  /** value = mantissa × 10^scale */
  mantissa: bigint;
  scale: number;
  format: Format;
}

const DECIMAL_SUFFIX: Record<string, number> = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const BINARY_SUFFIX: Record<string, number> = { Ki: 1, Mi: 2, Gi: 3, Ti: 4, Pi: 5, Ei: 6 };

export function parseQuantity(text: string): Parsed {
  const m = /^([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)$/.exec(text.trim());
  if (!m || (m[2] === '' && (m[3] === undefined || m[3] === '')))
    throw new QuantityError(`quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`);
  const [, sign, whole, frac = '', suffix] = m;
  let mantissa = BigInt((whole || '0') + frac);
  if (sign === '-') mantissa = -mantissa;
  let scale = -frac.length;
  let format: Format;
  if (suffix! in DECIMAL_SUFFIX) {
    format = 'DecimalSI';
    scale += DECIMAL_SUFFIX[suffix!]!;
  } else if (suffix! in BINARY_SUFFIX) {
    format = 'BinarySI';
    mantissa *= 1024n ** BigInt(BINARY_SUFFIX[suffix!]!);
  } else if (/^[eE][-+]?[0-9]+$/.test(suffix!)) {
    format = 'DecimalExponent';
    scale += Number(suffix!.slice(1));
  } else {
    throw new QuantityError(`unable to parse quantity's suffix`);
  }
  // Kubernetes keeps at most nano precision, rounding up.
  if (scale < -9) {
    const drop = 10n ** BigInt(-9 - scale);
    const q = mantissa / drop;
    mantissa = mantissa % drop === 0n ? q : mantissa > 0n ? q + 1n : q;
    scale = -9;
  }
  return { mantissa, scale, format };
}

function removeFactors(v: bigint, base: bigint): [bigint, number] {
  let n = 0;
  if (v === 0n) return [0n, 0];
  while (v % base === 0n) {
    v /= base;
    n++;
  }
  return [v, n];
}

/** The canonical string of a quantity given as text or a number. */
export function canonicalQuantity(input: string | number): string {
  const q = parseQuantity(typeof input === 'number' ? numberText(input) : input);
  if (q.mantissa === 0n) return '0';
  let format = q.format;
  if (format === 'BinarySI') {
    const exactInt = q.scale >= 0 || q.mantissa % 10n ** BigInt(-q.scale) === 0n;
    const value = q.scale >= 0 ? q.mantissa * 10n ** BigInt(q.scale) : q.mantissa / 10n ** BigInt(-q.scale);
    if ((value > -1024n && value < 1024n) || !exactInt) format = 'DecimalSI';
    else {
      const [amount, times] = removeFactors(value, 1024n);
      const suffix = Object.entries(BINARY_SUFFIX).find(([, n]) => n === times)?.[0];
      if (times === 0) return amount.toString();
      if (suffix) return `${amount}${suffix}`;
      // Beyond Ei: keep the remaining powers in the number.
      return `${amount * 1024n ** BigInt(times - 6)}Ei`;
    }
  }
  let [amount, times] = removeFactors(q.mantissa, 10n);
  let exponent = q.scale + times;
  const r = ((exponent % 3) + 3) % 3;
  if (r === 1) {
    amount *= 10n;
    exponent -= 1;
  } else if (r === 2) {
    amount *= 100n;
    exponent -= 2;
  }
  if (format === 'DecimalExponent') return exponent === 0 ? amount.toString() : `${amount}e${exponent}`;
  const suffix = Object.entries(DECIMAL_SUFFIX).find(([, n]) => n === exponent)?.[0];
  if (suffix !== undefined) return `${amount}${suffix}`;
  return `${amount}e${exponent}`;
}

function numberText(n: number): string {
  if (Number.isInteger(n)) return BigInt(n).toString();
  return String(n).replace(/e\+?/, 'e');
}
