// Analysis messages as istiod puts them in status (pilot/pkg/status IstioGenerationProvider,
// diag.Message.AnalysisMessageBase), the analysis interval's lower bound (features.AnalysisInterval) and
// the analyzers re-run for changed kinds (analysis.CombinedAnalyzer.RelevantSubset). Tables from Istio's
// code, not from ours.
import t from 'tap';
import { ALL_ANALYZERS } from '../../src/analysis/analyzers';
import { MESSAGES } from '../../src/analysis/messages';
import { analysisMessageBase, sameStatus, statusWithMessages } from '../../src/analysis/status';
import { analysisInterval, relevantSubset } from '../../src/meshd/analysis-controller';

const DOCS = 'https://mesh.io/v1.26/docs/reference/config/analysis';

t.test('AnalysisMessageBase: upper-case level, code only, documentation URL without ?ref=', async (t) => {
  t.same(analysisMessageBase({ type: MESSAGES.ReferencedResourceNotFound }), {
    documentationUrl: `${DOCS}/ist0101/`,
    level: 'ERROR',
    type: { code: 'IST0101' },
  });
  t.same(analysisMessageBase({ type: MESSAGES.VirtualServiceHostNotFoundInGateway }), {
    documentationUrl: `${DOCS}/ist0132/`,
    level: 'WARNING',
    type: { code: 'IST0132' },
  });
  t.same(analysisMessageBase({ type: MESSAGES.NamespaceNotInjected }), {
    documentationUrl: `${DOCS}/ist0102/`,
    level: 'INFO',
    type: { code: 'IST0102' },
  });
});

t.test('status: observedGeneration as protojson writes int64, messages replaced wholesale, other fields kept', async (t) => {
  const msg = { documentationUrl: `${DOCS}/ist0101/`, level: 'ERROR' as const, type: { code: 'IST0101' } };
  const conditions = [{ type: 'Reconciled', status: 'True' }];
  const rows: Array<[string, unknown, number, (typeof msg)[], object]> = [
    ['no status yet', undefined, 1, [msg], { observedGeneration: '1', validationMessages: [msg] }],
    ['other writers keep their conditions', { conditions }, 3, [msg], { conditions, observedGeneration: '3', validationMessages: [msg] }],
    [
      'no messages: the field goes (an empty repeated field is not marshalled)',
      { observedGeneration: '1', validationMessages: [msg] },
      2,
      [],
      { observedGeneration: '2' },
    ],
    [
      'old messages are not merged with new ones',
      { validationMessages: [{ ...msg, type: { code: 'IST0132' } }] },
      1,
      [msg],
      { observedGeneration: '1', validationMessages: [msg] },
    ],
  ];
  for (const [name, live, gen, msgs, want] of rows) t.same(statusWithMessages(live, gen, msgs), want, name);
});

t.test('sameStatus: key order and a numeric observedGeneration do not count as changes', async (t) => {
  t.ok(sameStatus({ observedGeneration: 2, a: { x: 1, y: 2 } }, { a: { y: 2, x: 1 }, observedGeneration: '2' }));
  t.ok(sameStatus(undefined, {}));
  t.notOk(sameStatus({ observedGeneration: '1' }, { observedGeneration: '2' }));
  t.notOk(sameStatus({ validationMessages: [1, 2] }, { validationMessages: [2, 1] }), 'message order is part of the status');
});

t.test('PILOT_ANALYSIS_INTERVAL below 1 s becomes the 10 s default, with a warning', async (t) => {
  const warned: string[] = [];
  t.equal(
    analysisInterval(500, (m) => warned.push(m)),
    10_000,
  );
  t.equal(warned[0], 'PILOT_ANALYSIS_INTERVAL 500ms is too small, it will be set to default 10 seconds', "Go's Duration text");
  analysisInterval(0, (m) => warned.push(m));
  t.equal(warned.pop(), 'PILOT_ANALYSIS_INTERVAL 0s is too small, it will be set to default 10 seconds');
  t.equal(
    analysisInterval(1_000, (m) => warned.push(m)),
    1_000,
  );
  t.equal(
    analysisInterval(30_000, (m) => warned.push(m)),
    30_000,
  );
  t.equal(warned.length, 1);
});

t.test('a changed kind re-runs exactly the analyzers that read it', async (t) => {
  const gw = relevantSubset(ALL_ANALYZERS, new Set(['Gateway'])).map((a) => a.name);
  t.ok(gw.includes('gateway.ConflictingGatewayAnalyzer'), 'a Gateway analyzer');
  t.ok(gw.includes('virtualservice.GatewayAnalyzer'), "the VirtualService gateway analyzer reads Gateways (Istio's inputs)");
  t.notOk(gw.includes('virtualservice.ConflictingMeshGatewayHostsAnalyzer'), 'one reading VirtualServices only does not run');
  t.same(relevantSubset(ALL_ANALYZERS, new Set(['Unknown'])), []);
});
