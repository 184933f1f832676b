// Each flag type accepts what pflag accepts and rejects bad input with pflag's message, through the
// real parser and a real flag of that type from the tables.
import t from 'tap';
import { flagOf, program, run } from '../helpers/programs';

// [program, command words, flag, bad value, expected message after `invalid argument "<bad>" for "<flag>" flag: `]
const bad: Array<[string, string[], string, string, string]> = [
  ['pilot-discovery', ['discovery'], '--profile', 'maybe', 'strconv.ParseBool: parsing "maybe": invalid syntax'],
  ['pilot-discovery', ['discovery'], '--orchApiBurst', '1.5', 'strconv.ParseInt: parsing "1.5": invalid syntax'],
  ['pilot-discovery', ['discovery'], '--orchApiBurst', '9223372036854775808', 'strconv.ParseInt: parsing "9223372036854775808": value out of range'],
  ['pilot-agent', ['request', 'GET', '/'], '--debug-port', '2147483648', 'strconv.ParseInt: parsing "2147483648": value out of range'],
  ['pilot-discovery', ['discovery'], '--ctrlz_port', '65536', 'strconv.ParseUint: parsing "65536": value out of range'],
  ['pilot-discovery', ['discovery'], '--ctrlz_port', '-1', 'strconv.ParseUint: parsing "-1": invalid syntax'],
  ['pilot-discovery', ['discovery'], '--orchApiQPS', 'abc', 'strconv.ParseFloat: parsing "abc": invalid syntax'],
  ['pilot-discovery', ['discovery'], '--orchApiQPS', '1e39', 'strconv.ParseFloat: parsing "1e39": value out of range'],
  ['pilot-discovery', ['discovery'], '--keepaliveInterval', '10', 'time: missing unit in duration "10"'],
  ['pilot-discovery', ['discovery'], '--keepaliveInterval', '1y', 'time: unknown unit "y" in duration "1y"'],
  ['pilot-discovery', ['discovery'], '--clusterAliases', 'alias1', 'alias1 must be formatted as key=value'],
  ['pilot-discovery', ['discovery'], '--vklog', 'x', 'strconv.ParseInt: parsing "x": invalid syntax'],
  ['pilot-discovery', ['discovery'], '--registries', 'Consul', '"Consul" is not one of Orchestrator, Mock'],
  [
    'meshctl',
    ['experimental', 'workload', 'group', 'create'],
    '--weight',
    '4294967296',
    'strconv.ParseUint: parsing "4294967296": value out of range',
  ],
  ['meshctl', ['experimental', 'workload', 'group', 'create'], '--weight', '-3', 'strconv.ParseUint: parsing "-3": invalid syntax'],
];

t.test('bad values are rejected with pflag messages and a usage hint', async (t) => {
  for (const [prog, words, flag, value, msg] of bad) {
    const res = await run(program(prog), [...words, `${flag}=${value}`]);
    const f = program(prog);
    const spec = flagOf(
      f,
      words.filter((w) => !/^[A-Z/]/.test(w)),
      flag.slice(2),
    )!;
    // pflag names the flag with its short form when it has one: "-w, --weight".
    const display = spec.short ? `-${spec.short}, ${flag}` : flag;
    // A command line that does not parse: istioctl exits 64 (EX_USAGE), the daemons their error code.
    t.equal(res.code, f.usageExitCode ?? f.errorExitCode, `${flag}=${value} exit code`);
    t.match(res.stderr, `Error: invalid argument "${value}" for "${display}" flag: ${msg}`, `${flag}=${value}`);
    t.match(res.stderr, /Run '.+ --help' for usage\./);
  }
});

t.test('short flag display name in messages', async (t) => {
  const res = await run(program('pilot-agent'), ['mesh-iptables', '--iptables-probe-port', 'x']);
  t.match(res.stderr, 'invalid argument "x" for "--iptables-probe-port" flag');
  const res2 = await run(program('pilot-agent'), ['mesh-iptables', '-n=maybe']);
  t.match(res2.stderr, 'invalid argument "maybe" for "-n, --dry-run" flag: strconv.ParseBool');
});

t.test('unknown flags, missing values, arguments', async (t) => {
  const disc = program('pilot-discovery');
  t.match((await run(disc, ['discovery', '--nope'])).stderr, 'Error: unknown flag: --nope');
  t.match((await run(disc, ['discovery', '-z'])).stderr, "Error: unknown shorthand flag: 'z' in -z");
  t.match((await run(disc, ['discovery', '--grpcAddr'])).stderr, 'Error: flag needs an argument: --grpcAddr');
  t.match((await run(disc, ['discovery', '-n'])).stderr, "Error: flag needs an argument: 'n' in -n");
  t.match((await run(disc, ['discovery', 'extra'])).stderr, 'Error: unknown command "extra" for "pilot-discovery discovery"');
  t.match((await run(disc, ['discovry'])).stderr, /Error: unknown command "discovry" for "pilot-discovery"\n\nDid you mean this\?\n\tdiscovery/);
  t.match((await run(disc, ['request', 'GET'])).stderr, 'Error: accepts between 2 and 3 arg(s), received 1');
  t.match((await run(disc, ['request', 'GET', '/a', 'b', 'c'])).stderr, 'Error: accepts between 2 and 3 arg(s), received 4');
});

t.test('accepted spellings: --x=v, --x v, -x v, -xv, -x=v, bool forms, -- ends flags, repeated lists', async (t) => {
  const agent = program('pilot-agent');
  // mesh-iptables --dry-run prints the rules it would apply; proxy-port shows up in them.
  for (const argv of [
    ['mesh-iptables', '--dry-run', '--proxy-port=15999', '-i', '*'],
    ['mesh-iptables', '-n', '--proxy-port', '15999', '-i*'],
    ['mesh-iptables', '--dry-run=true', '-p15999', '-i=*'],
    ['mesh-iptables', '-np', '15999', '-i', '*'],
  ]) {
    const res = await run(agent, argv);
    t.equal(res.code, 0, argv.join(' '));
    t.match(res.stdout, '--to-ports 15999', argv.join(' '));
  }
  const res = await run(agent, ['mesh-iptables', '--dry-run=false', '--dry-run=maybe']);
  t.match(res.stderr, 'invalid argument "maybe" for "-n, --dry-run" flag');
  const disc = program('pilot-discovery');
  t.equal((await run(disc, ['request', '--', 'GET', '--not-a-flag'])).stderr.includes('unknown flag'), false, '-- ends flags');
});

t.test('env fallback of a flag, and a bad one', async (t) => {
  const disc = program('pilot-discovery');
  const help = await run(disc, ['discovery', '--help'], { POD_NAMESPACE: 'team-a' });
  t.match(help.stdout, /-n, --namespace string .*\(default "team-a"\)/);
  const bad = await run(program('install-cni'), ['--help'], { ORCHCONFIG_MODE: 'rw' });
  t.not(bad.code, 0);
  t.match(bad.stderr, 'ORCHCONFIG_MODE');
  t.match(bad.stderr, '--orchconfig-mode');
});
