// A small seeded generator (mulberry32) for fuzz-style tests: the same seed gives the same inputs, so a failing
// run can be repeated. Plain JavaScript so that fixtures run by `node` alone (in a pod's namespace) share it.

/** Numbers in [0, 1) from `seed`. */
export function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `base` with 1 to 4 bytes flipped or replaced, cut short one time in five. */
export function mutate(base, random) {
  const m = Buffer.from(base);
  const edits = 1 + Math.floor(random() * 4);
  for (let e = 0; e < edits; e++) {
    const at = Math.floor(random() * m.length);
    if (random() < 0.5) m[at] ^= 1 << Math.floor(random() * 8);
    else m[at] = Math.floor(random() * 256);
  }
  return random() < 0.2 ? m.subarray(0, Math.floor(random() * m.length)) : m;
}
