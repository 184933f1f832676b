// Go's time.ParseDuration / Duration.String behaviour, with expectations from Go's own documentation
// and test table (time/time_test.go): these are the strings Istio users type and read.
import t from 'tap';
import { formatDurationNs, parseDurationNs } from '../../src/lib/duration';

const parses: Array<[string, bigint]> = [
  ['0', 0n],
  ['5s', 5_000_000_000n],
  ['30s', 30_000_000_000n],
  ['1478s', 1_478_000_000_000n],
  ['-5s', -5_000_000_000n],
  ['+5s', 5_000_000_000n],
  ['-0', 0n],
  ['5.0s', 5_000_000_000n],
  ['5.6s', 5_600_000_000n],
  ['5.s', 5_000_000_000n],
  ['.5s', 500_000_000n],
  ['1.004s', 1_004_000_000n],
  ['100.00100s', 100_001_000_000n],
  ['10ns', 10n],
  ['11us', 11_000n],
  ['12µs', 12_000n],
  ['12μs', 12_000n],
  ['13ms', 13_000_000n],
  ['14s', 14_000_000_000n],
  ['15m', 900_000_000_000n],
  ['16h', 57_600_000_000_000n],
  ['3h30m', 12_600_000_000_000n],
  ['10.5s4m', 250_500_000_000n],
  ['1h0m0s', 3_600_000_000_000n],
  ['1m30s', 90_000_000_000n],
  ['2562047h47m16.854775807s', 9_223_372_036_854_775_807n],
  ['0.3333333333333333333h', 1_199_999_999_999n],
];
const rejects: Array<[string, string]> = [
  ['', 'time: invalid duration ""'],
  ['3', 'time: missing unit in duration "3"'],
  ['-', 'time: invalid duration "-"'],
  ['s', 'time: invalid duration "s"'],
  ['.', 'time: invalid duration "."'],
  ['-.', 'time: invalid duration "-."'],
  ['.s', 'time: invalid duration ".s"'],
  ['1d', 'time: unknown unit "d" in duration "1d"'],
  ['abc', 'time: invalid duration "abc"'],
  ['9223372036854775808ns', 'time: invalid duration "9223372036854775808ns"'],
];
const formats: Array<[bigint, string]> = [
  [0n, '0s'],
  [1n, '1ns'],
  [1_100n, '1.1µs'],
  [2_200_000n, '2.2ms'],
  [3_300_000_000n, '3.3s'],
  [240_000_000_000n, '4m0s'],
  [301_000_000_000n, '5m1s'],
  [22_021_000_000_000n, '6h7m1s'],
  [100_000_000n, '100ms'],
  [86_400_000_000_000n, '24h0m0s'],
  [9_223_372_036_854_775_807n, '2562047h47m16.854775807s'],
  [-1n, '-1ns'],
  [-300_000_000_000n, '-5m0s'],
];

t.test('parse', async (t) => {
  for (const [s, ns] of parses) t.equal(parseDurationNs(s), ns, s);
});
t.test('reject with Go messages', async (t) => {
  for (const [s, msg] of rejects) t.throws(() => parseDurationNs(s), { message: msg }, JSON.stringify(s));
});
t.test('format', async (t) => {
  for (const [ns, s] of formats) t.equal(formatDurationNs(ns), s, s);
});
