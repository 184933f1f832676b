// The shared polling helper (scripts/lib/wait.mjs through test/helpers/wait.ts).
import t from 'tap';
import { Exited, waitFor, waitForValue } from '../helpers/wait';

t.test('waitFor resolves with the elapsed time once the check holds; a throw counts as not yet', async (t) => {
  let n = 0;
  const ms = await waitFor(
    'the third look',
    () => {
      n++;
      if (n === 1) throw new Error('not up');
      return n >= 3;
    },
    { intervalMs: 30 },
  );
  t.equal(n, 3, 'looked three times');
  t.ok(ms >= 60 && ms < 5000, `two pauses of 30 ms passed (${ms} ms)`);
});

t.test('a check that never holds fails after the timeout, naming what and the last error', async (t) => {
  const start = Date.now();
  await t.rejects(
    waitFor(
      () => 'the moon',
      () => {
        throw new Error('still night');
      },
      { timeoutMs: 100, intervalMs: 10 },
    ),
    { message: 'timed out after 100 ms: the moon (last error: still night)' },
  );
  t.ok(Date.now() - start >= 100, 'not before the timeout');
  await t.rejects(
    waitFor('nothing', () => false, { timeoutMs: 50 }),
    { message: 'timed out after 50 ms: nothing' },
  );
});

t.test('Exited stops the wait at once', async (t) => {
  const start = Date.now();
  await t.rejects(
    waitFor(
      'a dead process',
      () => {
        throw new Exited('it exited');
      },
      { timeoutMs: 10_000 },
    ),
    { message: 'it exited' },
  );
  t.ok(Date.now() - start < 5000, 'did not wait for the timeout');
});

t.test('waitForValue resolves with the first value that is not undefined, null or false', async (t) => {
  const seq: (string | undefined | null | false)[] = [undefined, null, false, 'x'];
  t.equal(await waitForValue('x', () => seq.shift(), { intervalMs: 1 }), 'x');
  t.equal(await waitForValue('zero', () => 0, { intervalMs: 1 }), 0, '0 is a value');
});
