// The ControlZ log-scopes page in headless Chromium: a level changed through the page's controls reaches
// the logging library (seen through the JSON API), and a change made through the API shows on the page.
import t from 'tap';
import { getScopes, registerScope } from '../../src/lib/log';
import { startControlZ } from '../../src/serve/ctrlz/server';
import { Cdp, findChromium } from './cdp';
import { getJSON, request } from './helpers';
import { waitForValue } from '../helpers/wait';

const chromium = findChromium();

t.test(
  'log scopes page in Chromium',
  { skip: chromium ? false : 'Debian chromium is not installed (apt-get install -y chromium)', timeout: 120_000 },
  async (t) => {
    const scope = registerScope('browsertest', 'a scope changed from the browser');
    const listener = await startControlZ({ address: '127.0.0.1', port: 0, onExit: () => {} });
    t.teardown(() => listener.drain(Date.now() + 1000));
    const base = `http://${listener.bound.address}`;
    const cdp = Cdp.launch(chromium!);
    t.teardown(() => cdp.close());
    await cdp.send('Browser.getVersion');

    const session = await cdp.open(`${base}/scopez/`);
    const row = '#scope-browsertest';
    await waitForValue(
      'the scopes table',
      async () => ((await cdp.evaluate<boolean>(session, `!!document.querySelector('${row} .output-level')`)) ? true : undefined),
      { timeoutMs: 30_000 },
    );
    t.equal(await cdp.evaluate<string>(session, `document.querySelector('${row} .output-level').value`), 'info', 'rendered level');

    // Choose "debug" in the output-level control, as a user would, and let the page's script send it.
    await cdp.evaluate(
      session,
      `(() => { const s = document.querySelector('${row} .output-level'); s.focus(); s.value = 'debug';
        s.dispatchEvent(new Event('change', { bubbles: true })); s.blur(); return true; })()`,
    );
    await waitForValue(
      'the JSON API to report debug',
      async () => {
        const s = (await getJSON(`${base}/scopej/browsertest`)) as { output_level: string };
        return s.output_level === 'debug' ? true : undefined;
      },
      { timeoutMs: 10_000 },
    );
    t.equal(getScopes().find((s) => s.name === 'browsertest')?.outputLevel, 'debug', 'changed in the logging library');
    t.ok(scope.debugEnabled(), 'the scope logs debug messages now');

    // The caller checkbox, clicked.
    await cdp.evaluate(session, `document.querySelector('${row} .log-callers').click(), true`);
    const after = await waitForValue(
      'log_callers to be on',
      async () => {
        const s = (await getJSON(`${base}/scopej/browsertest`)) as { output_level: string; log_callers: boolean };
        return s.log_callers ? s : undefined;
      },
      { timeoutMs: 10_000 },
    );
    t.equal(after.output_level, 'debug', 'the earlier change is kept');

    // A change through the API appears on the page (it refreshes every second).
    const put = await request(`${base}/scopej/browsertest`, {
      method: 'PUT',
      body: JSON.stringify({ output_level: 'debug', stack_trace_level: 'warn', log_callers: true }),
    });
    t.equal(put.status, 202);
    await waitForValue(
      'the page to show the new stack-trace level',
      async () => ((await cdp.evaluate<string>(session, `document.querySelector('${row} .stack-trace-level').value`)) === 'warn' ? true : undefined),
      { timeoutMs: 10_000 },
    );
    const exceptions = cdp.events.filter((e) => e.method === 'Runtime.exceptionThrown');
    t.same(exceptions, [], 'no script errors on the page');
  },
);
