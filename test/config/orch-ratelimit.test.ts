// The --orchApiQPS/--orchApiBurst token bucket, with client-go's semantics: it starts full with
// Burst tokens, refills at QPS per second up to Burst, and QPS 0 / Burst 0 mean 5 / 10, QPS < 0 no limit.
import t from 'tap';
import { DEFAULT_BURST, DEFAULT_QPS, limiterFor, TokenBucket, Unlimited } from '../../src/config/orch/ratelimit';

t.test('a full bucket lets Burst requests through, then one per 1/QPS', async (t) => {
  let now = 0;
  const b = new TokenBucket(2, 3, () => now);
  t.same([b.reserve(), b.reserve(), b.reserve()], [0, 0, 0], 'burst of 3 goes at once');
  t.equal(b.reserve(), 500, 'the 4th waits 1/QPS');
  t.equal(b.reserve(), 1000, 'the 5th queues behind it');
  now = 1000; // two tokens refilled, both already promised
  t.equal(b.reserve(), 500);
});

t.test('refill never exceeds Burst', async (t) => {
  let now = 0;
  const b = new TokenBucket(10, 2, () => now);
  b.reserve();
  b.reserve();
  now = 60_000; // a minute idle: still only 2 tokens
  t.same([b.reserve(), b.reserve()], [0, 0]);
  t.equal(b.reserve(), 100);
});

t.test('fractional QPS', async (t) => {
  let now = 0;
  const b = new TokenBucket(0.5, 1, () => now);
  t.equal(b.reserve(), 0);
  t.equal(b.reserve(), 2000);
});

t.test('take() waits in real time; close() rejects waiters', async (t) => {
  const b = new TokenBucket(20, 1);
  const t0 = performance.now();
  await b.take();
  await b.take();
  await b.take();
  const took = performance.now() - t0;
  t.ok(took >= 95, `two waits of 50ms took ${took.toFixed(0)}ms`);
  const pending = b.take();
  b.close();
  await t.rejects(pending, { name: 'RateLimiterClosedError' });
  await t.rejects(b.take(), { name: 'RateLimiterClosedError' }, 'closed stays closed');
});

t.test('flag values: client-go defaults for 0, no limit for negative QPS, errors for bad input', async (t) => {
  const d = limiterFor(0, 0);
  t.ok(d instanceof TokenBucket);
  t.equal((d as TokenBucket).qps, DEFAULT_QPS);
  t.equal((d as TokenBucket).burst, DEFAULT_BURST);
  t.equal(DEFAULT_QPS, 5);
  t.equal(DEFAULT_BURST, 10);
  const f = limiterFor(80, 160) as TokenBucket;
  t.same([f.qps, f.burst], [80, 160]);
  t.ok(limiterFor(-1, 0) instanceof Unlimited);
  t.throws(() => limiterFor(5, -1), /--orchApiBurst/);
  t.throws(() => limiterFor(5, 1.5), /--orchApiBurst/);
  t.throws(() => limiterFor(Number.NaN, 1), /--orchApiQPS/);
});
