// Gateway API v1.3.0 conformance, GATEWAY-HTTP and GATEWAY-GRPC tests Istio 1.26 passes, against the built
// programs with no cluster: the suite's manifests as --configDir files, echo backends reporting what they received,
// routers started by hand per Gateway, status from the daemon's /debug/gateway-status. The expectations are the
// suite's own, read from its Go source by extract/main.go (cases.json: regenerate with
// `go run ./extract/main.go $(go env GOMODCACHE)/sigs.k8s.io/gateway-api@v1.3.0 > cases.json`). Tests whose checks
// are code rather than data in the suite are listed in SPECIAL with what the runner does instead; what the runner
// cannot run yet is in NOT_RUN with the reason. The per-profile counts are checked against the README's table.
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { built } from '../../helpers/binary';
import { dataPlanes } from '../../helpers/envoy';
import { REPO } from '../../helpers/spec';
import { waitForValue } from '../../helpers/wait';
import { checkCall, compare, type ExpectedResponse, type GatewayRef, type NamespacedName, requestHeaders, unresolved } from './expect';
import { compareRpc, type GrpcExpectedResponse, methodOf, sendRpc } from './grpc';
import { type Doc, gateways, podDoc, withPodEndpoints } from './manifests';
import { type ConformanceRig, manifestDocs, startConformanceRig } from './rig';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
// about ten minutes on two busy cores: one daemon, a router per Gateway, fifty tests in a row
t.setTimeout(30 * 60_000);

interface Case {
  shortName: string;
  features: string[];
  manifests: string[] | null;
  responses: ExpectedResponse[];
  calls: Call[];
}

interface Call {
  fn: string;
  args: unknown[];
  beforeResponse?: number;
  /** A helper of the test's own file (extract/main.go), done by the runner as LOCAL says. */
  local?: boolean;
}

const CASES = JSON.parse(fs.readFileSync(new URL('cases.json', import.meta.url), 'utf8')) as Case[];
const CONTROLLER = 'mesh.io/gateway-controller';

/** The tests of the GATEWAY-HTTP and GATEWAY-GRPC profiles run here (Istio 1.26 passes each of them). */
export const RUN: readonly string[] = [
  'HTTPRouteSimpleSameNamespace',
  'HTTPRouteMatching',
  'HTTPRouteMatchingAcrossRoutes',
  'HTTPRouteHeaderMatching',
  'HTTPRouteQueryParamMatching',
  'HTTPRouteMethodMatching',
  'HTTPRouteHostnameIntersection',
  'HTTPRouteListenerHostnameMatching',
  'HTTPRouteRequestHeaderModifier',
  'HTTPRouteResponseHeaderModifier',
  'HTTPRouteRedirectHostAndStatus',
  'HTTPRouteRedirectPath',
  'HTTPRouteRedirectPort',
  'HTTPRouteRedirectScheme',
  'HTTPRouteRewriteHost',
  'HTTPRouteRewritePath',
  'HTTPRouteWeight',
  'HTTPRouteCrossNamespace',
  'HTTPRouteReferenceGrant',
  'HTTPRoutePartiallyInvalidViaInvalidReferenceGrant',
  'HTTPRouteInvalidBackendRefUnknownKind',
  'HTTPRouteInvalidCrossNamespaceBackendRef',
  'HTTPRouteInvalidCrossNamespaceParentRef',
  'HTTPRouteInvalidNonExistentBackendRef',
  'HTTPRouteInvalidParentRefNotMatchingListenerPort',
  'HTTPRouteInvalidParentRefNotMatchingSectionName',
  'HTTPRouteInvalidParentRefSectionNameNotMatchingPort',
  'HTTPRouteInvalidReferenceGrant',
  'HTTPRouteRequestMirror',
  'HTTPRouteRequestMultipleMirrors',
  'HTTPRouteTimeoutRequest',
  'HTTPRouteTimeoutBackendRequest',
  'HTTPRouteExactPathMatching',
  'HTTPRoutePathMatchOrder',
  'HTTPRouteListenerPortMatching',
  'HTTPRouteServiceTypes',
  'HTTPRouteDisallowedKind',
  'HTTPRouteRequestHeaderModifierBackendWeights',
  'HTTPRouteHTTPSListener',
  'GatewayWithAttachedRoutes',
  'GatewayWithAttachedRoutesWithPort8080',
  'GatewayInvalidRouteKind',
  'GatewaySecretReferenceGrantAllInNamespace',
  'GatewaySecretReferenceGrantSpecific',
  'GatewaySecretMissingReferenceGrant',
  'GatewaySecretInvalidReferenceGrant',
  'GatewayInvalidTLSConfiguration',
  'GatewayHTTPListenerIsolation',
  'GRPCExactMethodMatching',
  'GRPCRouteHeaderMatching',
  'GRPCRouteListenerHostnameMatching',
];

/**
 * Tests that fail here today, and why: they run, their failures are printed, and the file asserts only that they
 * still fail (one that passes must leave this list and raise the README's count).
 */
export const KNOWN_FAILING: Record<string, string> = {};

/** Checks the suite makes in code, not data, and what the runner does instead (by hand from the Go source). */
const SPECIAL: Record<string, string> = {
  HTTPRouteWeight: 'testDistribution: 500 requests, infra-backend-v1 70 %, v2 30 %, v3 none, ±5 points',
  HTTPRouteListenerPortMatching: 'each request to the listener whose port its Host names, :80 without one',
};

/** The profile of a test, from its features as the suite's profiles (conformance/utils/suite/profiles.go) group them. */
function profile(c: Case): string {
  const f = c.features ?? [];
  if (f.some((x) => x.startsWith('SupportMesh'))) return 'MESH';
  if (f.includes('SupportGRPCRoute')) return 'GATEWAY-GRPC';
  if (f.includes('SupportHTTPRoute')) return 'GATEWAY-HTTP';
  if (f.includes('SupportTLSRoute')) return 'GATEWAY-TLS';
  if (f.includes('SupportUDPRoute')) return 'GATEWAY-UDP';
  return 'GATEWAY-HTTP';
}

/** What a test's own helpers change: its manifests, and the certificate its TLS requests trust. */
interface CaseState {
  docs: readonly Doc[];
  trust?: string;
}

/**
 * The helpers of the tests' own files the runner does, by hand from their Go source; each updates the state, or
 * throws why it cannot be done. Any other helper fails its test.
 */
const LOCAL: Record<string, (rig: ConformanceRig, call: Call, state: CaseState) => void> = {
  // HTTPRouteServiceTypes: the pods it lists are infra-backend-v1's (it reads that Deployment's selector); they run
  // in the suite's cluster, so the runner writes them too (an endpoint naming a Pod the daemon does not know is
  // dropped, as Istio drops it)
  setupEndpointSlices: (rig, call, state) => {
    const [prefixes, ns] = call.args as [string[], string];
    const dep = 'gateway-conformance-infra/infra-backend-v1';
    if (!rig.pods.has(dep)) throw new Error(`no pods of ${dep}`);
    const pod = podDoc(manifestDocs('base.yaml'), dep, '127.0.0.1');
    const slices = withPodEndpoints(state.docs, prefixes, ns, [{ name: pod.metadata!.name!, namespace: pod.metadata!.namespace!, ip: '127.0.0.1' }]);
    state.docs = [...slices.filter((d) => !(d.kind === 'Pod' && d.metadata?.name === pod.metadata!.name)), pod];
  },
  // HTTPRouteWeight: the distribution is checked with the response it is given (weights below)
  testDistribution: () => undefined,
  // the Secret's certificate, which the test's TLS requests trust (tls.MakeTLSRequest… with cPem)
  GetTLSSecret: (rig, call, state) => {
    const nn = call.args[0] as NamespacedName;
    state.trust = rig.secretCert(`${nn.Namespace}/${nn.Name}`);
    if (!state.trust) throw new Error(`no Secret ${nn.Namespace}/${nn.Name}`);
  },
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The Gateway and its port a test's requests go to: its first Gateway reference (the suite's gwAddr). */
function target(
  c: Case,
  e: ExpectedResponse,
  docs: readonly Doc[],
  rig: ConformanceRig,
): { gw: string; port: number; host: string; https: boolean } | undefined {
  const ref = e.$gateway ?? (c.calls.flatMap((x) => x.args).find((a) => (a as { $type?: string })?.$type === 'GatewayRef') as GatewayRef | undefined);
  if (!ref) return undefined;
  const gw = `${ref.gateway.Namespace}/${ref.gateway.Name}`;
  const doc = docs.find((d) => d.kind === 'Gateway' && `${d.metadata?.namespace}/${d.metadata?.name}` === gw);
  const listeners = (doc?.spec?.['listeners'] as Array<{ name: string; port: number; protocol?: string }> | undefined) ?? [];
  // HTTPRouteListenerPortMatching sends each request to the listener whose port its Host names (80 when none)
  const hostPort = c.shortName === 'HTTPRouteListenerPortMatching' ? Number(e.Request?.Host?.split(':')[1] ?? 80) : undefined;
  const l = (hostPort ? listeners.find((x) => x.port === hostPort) : listeners.find((x) => x.name === ref.listeners?.[0])) ?? listeners[0];
  if (!l) return undefined;
  return { gw, port: rig.listenerPort(gw, l.port), host: l.port === 80 ? '127.0.0.1' : `127.0.0.1:${l.port}`, https: l.protocol === 'HTTPS' };
}

/** MakeRequestAndExpectEventuallyConsistentResponse; with `tls`, MakeTLSRequestAndExpectEventuallyConsistentResponse. */
async function eventually(
  rig: ConformanceRig,
  port: number,
  host: string,
  e: ExpectedResponse,
  tls?: { servername: string; ca: string },
): Promise<string | undefined> {
  const headers = { ...requestHeaders(e), ...(e.Request.Host ? { host: e.Request.Host } : { host }) };
  // the suite allows 30 s (MaxTimeToConsistency); once status is written a config reaches the router in far less
  const deadline = Date.now() + 8_000;
  let why: string | undefined;
  let streak = 0;
  while (Date.now() < deadline) {
    const r = await rig.request(port, { method: e.Request.Method, path: e.Request.Path ?? '/', headers, ...(tls ? { tls } : {}) });
    why = compare(e, e.Request.Path ?? '/', r, (p) => rig.manifestPort(p));
    streak = why ? 0 : streak + 1;
    if (streak >= 2) return undefined;
    if (why) await sleep(200);
  }
  return why;
}

async function eventuallyRpc(port: number, host: string, e: GrpcExpectedResponse): Promise<string | undefined> {
  const deadline = Date.now() + 8_000;
  let why: string | undefined;
  let streak = 0;
  while (Date.now() < deadline) {
    why = compareRpc(e, await sendRpc(port, host, e));
    streak = why ? 0 : streak + 1;
    if (streak >= 2) return undefined;
    if (why) await sleep(200);
  }
  return why;
}

async function mirrored(rig: ConformanceRig, e: ExpectedResponse): Promise<string | undefined> {
  for (const m of e.MirroredTo ?? []) {
    const b = rig.backends.get(`${m.BackendRef.Namespace}/${m.BackendRef.Name}`);
    const p = (e.Request.Path ?? '/').split('?')[0];
    const seen = await waitForValue(`mirror to ${m.BackendRef.Name}`, () => b?.received.some((r) => r.path.split('?')[0] === p) || undefined, {
      timeoutMs: 10_000,
    }).catch(() => false);
    if (!seen) return `no mirrored request to ${m.BackendRef.Namespace}/${m.BackendRef.Name}`;
  }
  return undefined;
}

async function weights(rig: ConformanceRig, port: number, host: string, e: ExpectedResponse): Promise<string | undefined> {
  const seen: Record<string, number> = {};
  for (let i = 0; i < 50; i++) {
    const batch = await Promise.all(Array.from({ length: 10 }, () => rig.request(port, { path: '/', headers: { ...requestHeaders(e), host } })));
    for (const r of batch) {
      const why = compare(e, '/', r);
      if (why) return why;
      const b = ['infra-backend-v1', 'infra-backend-v2', 'infra-backend-v3'].find((x) => r.echo!.pod.startsWith(x)) ?? r.echo!.pod;
      seen[b] = (seen[b] ?? 0) + 1;
    }
  }
  const want: Record<string, number> = { 'infra-backend-v1': 0.7, 'infra-backend-v2': 0.3, 'infra-backend-v3': 0 };
  for (const [b, w] of Object.entries(want)) {
    const got = (seen[b] ?? 0) / 500;
    if (Math.abs(got - w) > 0.05) return `backend ${b}: ${(got * 100).toFixed(1)} % of requests, expected ${w * 100} % ±5`;
  }
  return undefined;
}

/** Runs one conformance test; the reasons it failed (none when it passed). */
async function runCase(t: Test, rig: ConformanceRig, c: Case, baseDocs: readonly Doc[]): Promise<string[]> {
  // a known failure's checks are reported, not asserted
  const check = (why: string | undefined, what: string) =>
    KNOWN_FAILING[c.shortName] ? (why ? t.comment(`${what}: ${why}`) : undefined) : t.equal(why, undefined, what);
  const docs = (c.manifests ?? []).flatMap((m) => manifestDocs(m));
  const failures: string[] = [];
  rig.apply(docs);
  // a router that does not get ready fails this test (counted, printed), not the file
  const started = await rig.routersFor(gateways([...baseDocs, ...docs]).map((g) => `${g.ns}/${g.name}`)).then(
    () => undefined,
    (e: Error) => e.message,
  );
  if (started) {
    check(started, 'router ready');
    rig.apply(undefined);
    return [`router: ${started}`];
  }
  // status, as the suite's helpers wait for it (eventually)
  for (const call of c.calls.filter((x) => x.fn !== 'Delete' && !x.local)) {
    const u = unresolved(call.args);
    if (u) {
      check(`the runner cannot evaluate ${u}`, `status: ${call.fn}`);
      failures.push(`${call.fn}: the runner cannot evaluate ${u}`);
      continue;
    }
    let why: string | undefined = 'not checked';
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && (why = checkCall(call.fn, call.args, await rig.status(), CONTROLLER))) await sleep(200);
    check(why, `status: ${call.fn}`);
    if (why) failures.push(`${call.fn}: ${why}`);
  }
  const state: CaseState = { docs };
  // the suite's own helpers, in the order the test calls them (before the response of their index)
  const local = (i: number) => {
    for (const call of c.calls.filter((x) => x.local && (x.beforeResponse ?? 0) === i)) {
      const why = LOCAL[call.fn] ? undefined : `the runner does not do ${call.fn}`;
      try {
        LOCAL[call.fn]?.(rig, call, state);
      } catch (err) {
        check(`${call.fn}: ${(err as Error).message}`, call.fn);
        failures.push(`${call.fn}: ${(err as Error).message}`);
        continue;
      }
      check(why, call.fn);
      if (why) failures.push(why);
      rig.apply(state.docs);
    }
  };
  for (const [i, e] of c.responses.entries()) {
    local(i);
    // suite.Client.Delete(obj) between the suite's requests: the object's file entry goes
    for (const del of c.calls.filter((x) => x.fn === 'Delete' && x.beforeResponse === i)) {
      const meta = (del.args[0] as { ObjectMeta: { Name: string; Namespace: string } }).ObjectMeta;
      state.docs = state.docs.filter((d) => !(d.metadata?.name === meta.Name && d.metadata?.namespace === meta.Namespace));
      rig.apply(state.docs);
    }
    const tgt = target(c, e, [...baseDocs, ...docs], rig);
    const name =
      e.TestCaseName ||
      (e.Request
        ? `${i}: ${e.Request.Method ?? 'GET'} ${e.Request.Host ?? ''}${e.Request.Path}`
        : `${i}: ${methodOf(e as unknown as GrpcExpectedResponse)} ${JSON.stringify((e as unknown as GrpcExpectedResponse).RequestMetadata ?? {})}`);
    const u = unresolved(e);
    if (u || !tgt) {
      check(`the runner cannot evaluate ${u ?? 'the gateway address'}`, name);
      failures.push(`${name}: the runner cannot evaluate ${u ?? 'the gateway address'}`);
      continue;
    }
    // an HTTPS listener is reached as the suite does: TLS to the request's host (its server name), trusting the
    // certificate GetTLSSecret read
    if (tgt.https && !state.trust) {
      check('an HTTPS listener but no certificate to trust (no GetTLSSecret)', name);
      failures.push(`${name}: no certificate to trust`);
      continue;
    }
    const tls = tgt.https ? { servername: (e.Request.Host ?? '').split(':')[0]!, ca: state.trust! } : undefined;
    if ((e as { $type?: string }).$type === 'grpc.ExpectedResponse') {
      const why = await eventuallyRpc(tgt.port, tgt.host, e as unknown as GrpcExpectedResponse);
      check(why, name);
      if (why) failures.push(`${name}: ${why}`);
      continue;
    }
    const why =
      c.shortName === 'HTTPRouteWeight'
        ? ((await eventually(rig, tgt.port, tgt.host, e)) ?? (await weights(rig, tgt.port, tgt.host, e)))
        : await eventually(rig, tgt.port, tgt.host, e, tls);
    const mirror = why ? undefined : await mirrored(rig, e);
    check(why ?? mirror, name);
    if (why ?? mirror) failures.push(`${name}: ${why ?? mirror}`);
  }
  local(c.responses.length);
  // what the routers said, for a failure to be investigated rather than retried
  if (failures.length)
    for (const g of gateways([...baseDocs, ...docs]))
      t.comment(`router ${g.ns}/${g.name}, last lines:\n${rig.routerOut(`${g.ns}/${g.name}`).split('\n').slice(-15).join('\n')}`);
  if (failures.length) t.comment(`daemon, last lines:\n${rig.daemon.log().split('\n').slice(-15).join('\n')}`);
  rig.apply(undefined);
  return failures;
}

export interface Outcome {
  profile: string;
  name: string;
  failures: string[];
}

// Our engine and, where installed (always in CI), Envoy; MESH_CONFORMANCE_PLANES=engine (or envoy) runs one of them
const planes = dataPlanes().filter((p) => (process.env['MESH_CONFORMANCE_PLANES'] ?? 'engine,envoy').split(',').includes(p));
for (const plane of planes) {
  t.test(`conformance, data plane ${plane}`, async (t) => {
    // MESH_CONFORMANCE_ONLY=<ShortName>,… runs those tests only (the README table is then not checked)
    const only = process.env['MESH_CONFORMANCE_ONLY']?.split(',');
    const cases = RUN.filter((n) => !only || only.includes(n)).map((n) => {
      const c = CASES.find((x) => x.shortName === n);
      if (!c) throw new Error(`no conformance test ${n} in cases.json`);
      return c;
    });
    const rig = await startConformanceRig(t, { tests: cases.map((c) => (c.manifests ?? []).flatMap((m) => manifestDocs(m))), dataPlane: plane });
    const baseDocs = manifestDocs('base.yaml');
    const outcomes: Outcome[] = [];
    for (const c of cases) {
      let failures: string[] = ['the test did not finish'];
      await t.test(c.shortName + (SPECIAL[c.shortName] ? ` (${SPECIAL[c.shortName]})` : ''), async (t) => {
        failures = await runCase(t, rig, c, baseDocs);
        // a known failure's checks were comments: its one assertion is that it still fails
        if (KNOWN_FAILING[c.shortName]) t.ok(failures.length > 0, `${c.shortName} still fails (${KNOWN_FAILING[c.shortName]})`);
      });
      outcomes.push({ profile: profile(c), name: c.shortName, failures });
      // the next test starts from the base manifests only: wait until this test's routes are gone
      await waitForValue(
        'the test’s objects removed',
        async () => {
          const st = await rig.status();
          return st.every((o) => !['HTTPRoute', 'GRPCRoute'].includes(o.kind) || false) || undefined;
        },
        { timeoutMs: 15_000 },
      ).catch(() => undefined);
    }
    fs.writeFileSync(path.join(rig.daemon.cwd, 'outcomes.json'), JSON.stringify(outcomes, null, 1));
    t.comment(
      outcomes
        .filter((o) => o.failures.length)
        .map((o) => `${o.name}: ${o.failures.join('; ')}`)
        .join('\n'),
    );
    if (only) return;
    const readme = fs.readFileSync(path.join(REPO, 'README.md'), 'utf8');
    const table = readme.slice(readme.indexOf('## Gateway API'));
    for (const p of ['GATEWAY-HTTP', 'GATEWAY-GRPC']) {
      const mine = outcomes.filter((o) => o.profile === p);
      const passed = mine.filter((o) => o.failures.length === 0).length;
      t.comment(`${plane} ${p}: ${passed} of ${mine.length} passed`);
      // the README's row: no fewer passing than it says (a regression fails), of the same number run
      const row = new RegExp(`\\|\\s*${p}\\s*\\|\\s*${plane}\\s*\\|\\s*(\\d+)\\s*\\|\\s*(\\d+)\\s*\\|`).exec(table);
      t.ok(row, `README table has a row for ${p} on ${plane}`);
      t.equal(Number(row?.[2]), mine.length, `README table: ${p} tests run on ${plane}`);
      t.ok(passed >= Number(row?.[1]), `README table: ${p} on ${plane}: ${passed} passed, the README says ${row?.[1]}`);
    }
  });
}
