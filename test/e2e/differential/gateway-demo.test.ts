// The gateway demo (`npm run demo -- gateway`: examples/gateway/config, a Gateway on 18080 and a VirtualService
// routing /headers and /get to the httpbin sample) through the differential harness (test/helpers/differential.ts):
// the demo's own documents, its fixed ports replaced by the rig's, run through the built gateway on our engine
// and on the real Envoy, and the requests the demo prints for a user to try (/headers, /get, a path with no
// route) plus what a user tries next (a query, a POST, HEAD, a prefix that only looks alike, a Host of their
// own) compared as the client and the sample observed them, but for the README's listed differences (known.ts).
import t from 'tap';
import { built } from '../../helpers/binary';
import { envoyMissing } from '../../helpers/envoy';
import { compareScenario, type Scenario } from '../../helpers/differential';
import { exampleConfig } from '../../helpers/differential-clients';
import { knownDifferences } from './known';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const scenario: Scenario = {
  name: 'gateway-demo',
  backends: ['httpbin'],
  config: (p) => exampleConfig('gateway', { '18080': String(p.gw), '19090': String(p.backends['httpbin']) }),
  ready: { name: 'ready', path: '/headers' },
  requests: [
    // as the demo prints them
    { name: 'headers', path: '/headers' },
    { name: 'nowhere', path: '/nowhere' },
    { name: 'get', path: '/get' },
    // what a user tries next
    { name: 'get-query', path: '/get?show_env=1&x=a%20b' },
    { name: 'headers-sub', path: '/headers/extra' },
    { name: 'prefix-lookalike', path: '/getaway' },
    { name: 'post', method: 'POST', path: '/get', headers: { 'content-type': 'text/plain' }, body: 'hello' },
    { name: 'head', method: 'HEAD', path: '/headers' },
    { name: 'other-host', path: '/headers', host: 'example.com:8443' },
    { name: 'forwarded-for', path: '/headers', headers: { 'x-forwarded-for': '203.0.113.7', 'x-forwarded-proto': 'https' } },
  ],
};

t.test('differential: the gateway demo', { skip: envoyMissing() }, async (t) => {
  await compareScenario(t, scenario, knownDifferences());
});
