// Every variable of spec doc 1 §8 and doc 2 §5/§8 is in the right program's table with the documented
// type and default; malformed values are rejected with the variable and the expected type named.
import t from 'tap';
import { agentAndCniEnv, agentAuthEnv, discoveryEnv } from '../helpers/spec';
import { program, run } from '../helpers/programs';
import { EnvTable } from '../../src/lib/env';
import { allFlags } from '../../src/cli/tree';
import { everyCommand } from '../helpers/programs';

const BAD: Record<string, string> = { B: 'maybe', I: '12x', D: '10', F: 'fast' };
const TYPE_WORD: Record<string, string> = { B: 'boolean', I: 'integer', D: 'duration', F: 'floating-point' };

const { agent, cni } = agentAndCniEnv();
const cases: Array<[string, ReturnType<typeof discoveryEnv>]> = [
  ['pilot-discovery', discoveryEnv()],
  ['pilot-agent', [...discoveryEnv(), ...agentAuthEnv(), ...agent]],
  ['install-cni', cni],
];

t.test('documented variables: name, type, default', async (t) => {
  for (const [prog, rows] of cases) {
    const table = program(prog).env;
    t.ok(rows.length > 20, `${prog}: ${rows.length} documented variables`);
    for (const r of rows) {
      // POD_NAMESPACE of the installer defaults to the pod's own namespace, not a literal.
      if (prog === 'install-cni' && r.name === 'POD_NAMESPACE') continue;
      const e = table.find((x) => x.name === r.name);
      if (!t.ok(e, `${prog}: ${r.name}`)) continue;
      t.equal(e!.type, r.type, `${prog}: ${r.name} type`);
      const specDefault = r.type === 'S' && r.default === '-' ? undefined : r.default;
      if (prog === 'pilot-agent' && agent.some((a) => a.name === r.name) && discoveryEnv().some((d) => d.name === r.name)) continue;
      t.equal(e!.default, specDefault, `${prog}: ${r.name} default`);
    }
  }
});

t.test('every default in every table parses as its type', async (t) => {
  for (const [prog] of cases) {
    const p = program(prog);
    const env: Record<string, string> = {};
    for (const e of p.env) if (e.default !== undefined && e.type !== 'S') env[e.name] = e.default;
    t.same(new EnvTable(p.env, env).errors(), [], `${prog}: all ${Object.keys(env).length} typed defaults parse`);
  }
});

t.test('typed getters return the documented defaults', async (t) => {
  const d = new EnvTable(program('pilot-discovery').env, {});
  t.equal(d.duration('PILOT_DEBOUNCE_AFTER'), 100);
  t.equal(d.duration('PILOT_DEBOUNCE_MAX'), 10_000);
  t.equal(d.duration('PILOT_JWT_PUB_KEY_REFRESH_INTERVAL'), 20 * 60_000);
  t.equal(d.int('PILOT_XDS_CACHE_SIZE'), 60000);
  t.equal(d.bool('PILOT_ENABLE_XDS_CACHE'), true);
  t.equal(d.float('PILOT_TRACE_SAMPLING'), 1);
  t.equal(d.string('PILOT_JWT_ENABLE_REMOTE_JWKS'), 'false');
  t.equal(d.duration('CA_SELF_SIGNED_CA_CERT_TTL'), 87600 * 3_600_000);
  const a = new EnvTable(program('pilot-agent').env, { MINIMUM_DRAIN_DURATION: '1m30s', PROXY_STATUS_PORT: '15999' });
  t.equal(a.duration('MINIMUM_DRAIN_DURATION'), 90_000);
  t.equal(a.int('PROXY_STATUS_PORT'), 15999);
  t.equal(a.int('PROXY_METRICS_PORT'), 15090);
  t.equal(a.string('DNS_PROXY_ADDR'), 'localhost:15053');
});

t.test('a malformed value of each typed variable stops the command, naming variable and type', async (t) => {
  for (const [prog] of cases) {
    const p = program(prog);
    for (const e of p.env) {
      const bad = BAD[e.type];
      if (!bad) continue;
      const res = await run(p, ['version'], { [e.name]: bad });
      if (!t.not(res.code, 0, `${prog}: ${e.name}=${bad} fails`)) continue;
      t.match(
        res.stderr,
        `environment variable ${e.name}: expected a${e.type === 'I' ? 'n' : ''} ${TYPE_WORD[e.type]}`,
        `${prog}: ${e.name} message`,
      );
    }
  }
});

t.test('flags with env fallbacks name variables of their program', async (t) => {
  for (const [prog] of cases) {
    const p = program(prog);
    for (const chain of everyCommand(p)) {
      for (const f of allFlags(chain)) {
        if (f.env)
          t.ok(
            p.env.some((e) => e.name === f.env),
            `${prog}: --${f.name} falls back to ${f.env}, which is in the table`,
          );
      }
    }
  }
});
