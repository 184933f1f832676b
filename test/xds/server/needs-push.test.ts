// Which types a full push regenerates for a proxy by the kinds it names, and which load assignments a push
// naming only services regenerates. Expected values are Istio 1.26's: pilot/pkg/xds/cds.go skippedCdsConfigs,
// eds.go skippedEdsConfigs and canSendPartialFullPushes, lds.go skippedLdsConfigs (per proxy type), rds.go
// skippedRdsConfigs; a push naming nothing (a registry change without names, a proxy's own request) pushes all.
import t from 'tap';
import { partialEdsHosts, typeNeedsFullPush } from '../../../src/xds/server/needs-push';
import { TYPE_URL } from '../../../src/lib/xds/type-urls';

const { cluster: CDS, endpoint: EDS, listener: LDS, route: RDS } = TYPE_URL;

t.test('types a full push regenerates, by the kind it names (the edits of the scale bench among them)', async (t) => {
  const cases: Array<[string, string, Array<[string, boolean]>]> = [
    [
      'nothing named',
      '',
      [
        [CDS, true],
        [EDS, true],
        [LDS, true],
        [RDS, true],
      ],
    ],
    [
      'VirtualService',
      'VirtualService/apps/vs',
      [
        [CDS, true],
        [EDS, false],
        [LDS, true],
        [RDS, true],
      ],
    ],
    [
      'DestinationRule',
      'DestinationRule/apps/dr',
      [
        [CDS, true],
        [EDS, true],
        [LDS, true],
        [RDS, true],
      ],
    ],
    [
      'ServiceEntry (a service)',
      'ServiceEntry/apps/svc.example.com',
      [
        [CDS, true],
        [EDS, true],
        [LDS, true],
        [RDS, true],
      ],
    ],
    [
      'WorkloadEntry',
      'WorkloadEntry/apps/we',
      [
        [CDS, false],
        [EDS, true],
        [LDS, false],
        [RDS, false],
      ],
    ],
    [
      'AuthorizationPolicy',
      'AuthorizationPolicy/apps/p',
      [
        [CDS, false],
        [EDS, false],
        [LDS, true],
        [RDS, false],
      ],
    ],
    [
      'Gateway (sidecar)',
      'Gateway/apps/gw',
      [
        [CDS, false],
        [EDS, false],
        [LDS, false],
        [RDS, true],
      ],
    ],
  ];
  for (const [what, key, expected] of cases) {
    const configs = new Set(key ? [key] : []);
    t.same(
      expected.map(([type]) => [type, typeNeedsFullPush(type, 'sidecar', configs)]),
      expected,
      what,
    );
  }
  t.ok(typeNeedsFullPush(LDS, 'router', new Set(['Gateway/apps/gw'])), "a Gateway changes a router's listeners");
});

t.test('a full push naming only services regenerates only their load assignments', async (t) => {
  const cases: Array<[string, string[], string[] | undefined]> = [
    ['nothing named: all', [], undefined],
    ['one service', ['ServiceEntry/apps/a.example.com'], ['a.example.com']],
    [
      'two services',
      ['ServiceEntry/apps/a.example.com', 'ServiceEntry/other/b.other.svc.cluster.local'],
      ['a.example.com', 'b.other.svc.cluster.local'],
    ],
    ['a service and kinds EDS skips', ['ServiceEntry/apps/a.example.com', 'VirtualService/apps/v', 'DNSName/apps/h'], ['a.example.com']],
    ['only kinds EDS skips: none', ['VirtualService/apps/v'], []],
    ['a DestinationRule: all', ['ServiceEntry/apps/a.example.com', 'DestinationRule/apps/d'], undefined],
    ['a PeerAuthentication: all', ['PeerAuthentication/apps/default'], undefined],
  ];
  for (const [what, keys, hosts] of cases) {
    const got = partialEdsHosts(new Set(keys));
    t.same(got && [...got].sort(), hosts, what);
  }
});
