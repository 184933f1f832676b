// Random trace and span ids as lower-case hex (Envoy's Hex::uint64ToHex of its random generator), drawn from a
// pooled buffer of crypto-random bytes so that a sampled request costs one slice, not one system call.
import { randomFillSync } from 'node:crypto';

const POOL = Buffer.alloc(4096);
let used = POOL.length;

/** 64 random bits as 16 hex digits; never all zero (a zero id means "absent" in B3 and W3C). */
export function randomId64(): string {
  for (;;) {
    if (used + 8 > POOL.length) {
      randomFillSync(POOL);
      used = 0;
    }
    const s = POOL.toString('hex', used, used + 8);
    used += 8;
    if (s !== '0000000000000000') return s;
  }
}

/** 128 random bits as 32 hex digits. */
export function randomId128(): string {
  return randomId64() + randomId64();
}

const HEX = /^[0-9a-f]+$/;

/** Whether `s` is `len` lower-case hex digits, not all zero (W3C trace-context's rule). */
export function isHexId(s: string, len: number): boolean {
  return s.length === len && HEX.test(s) && !/^0+$/.test(s);
}
