// The closer stack (src/lib/closers.ts): reverse order, each awaited, every closer run even when one fails
// (as Go runs every deferred call), the first failure reported, and unwinding on a failed start.
import t from 'tap';
import { Closers } from '../../src/lib/closers';

t.test('closes last opened first, awaiting each, once', async (t) => {
  const c = new Closers();
  const order: string[] = [];
  c.add(() => order.push('a'));
  c.add(async () => {
    await new Promise((r) => setTimeout(r, 5));
    order.push('b');
  });
  const res = c.closing({ close: () => order.push('c') });
  t.type(res.close, 'function', 'closing hands the resource back');
  await c.close();
  t.same(order, ['c', 'b', 'a']);
  await c.close();
  t.same(order, ['c', 'b', 'a'], 'a second close does nothing');
});

t.test('a failing closer does not stop the others; the first failure is thrown', async (t) => {
  const c = new Closers();
  const order: string[] = [];
  c.add(() => order.push('a'));
  c.add(() => {
    throw new Error('first registered failure');
  });
  c.add(async () => {
    throw new Error('last registered failure');
  });
  await t.rejects(c.close(), { message: 'last registered failure' });
  t.same(order, ['a']);
});

t.test('unwindOnError closes what a failed start opened and rethrows its error', async (t) => {
  const c = new Closers();
  const order: string[] = [];
  await t.rejects(
    c.unwindOnError(async () => {
      c.add(() => order.push('opened'));
      throw new Error('start failed');
    }),
    { message: 'start failed' },
  );
  t.same(order, ['opened']);
  t.equal(await c.unwindOnError(async () => 7), 7, 'a successful start leaves the stack for shutdown');
});
