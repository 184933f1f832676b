// What the bench scripts share: their command line, read by node:util parseArgs from one declared options table
// (name → type, default, help) that also prints --help; the medians their reports give; and the CPU pinning
// (taskset) that keeps the proxy under test and its load apart.
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

/**
 * @typedef {object} Option
 * @property {'boolean'|'number'|'integer'|'string'|'path'|'list'|'cpus'} type  `list`: comma-separated strings
 *   (`of: 'integer'` for integers); `path`: resolved against the working directory; `cpus`: a taskset CPU list
 * @property {unknown} [default]
 * @property {string} help
 * @property {number} [min]  for number, integer and integer lists
 * @property {number} [max]
 * @property {readonly string[]} [oneOf]  allowed values (of each item, for lists)
 * @property {'integer'} [of]  item type of a list
 * @property {boolean} [positional]  may also be given as a bare argument, in declared order (old invocations)
 * @property {string} [short]  a one-letter alias
 */

const CPUS = /^\d+([-,]\d+)*$/;

function convert(name, spec, raw) {
  const fail = (what) => {
    throw new Error(`--${name}: expected ${what}, got ${JSON.stringify(raw)} (--help lists the options)`);
  };
  const number = (v, integer) => {
    const n = Number(v);
    if (v === '' || !Number.isFinite(n) || (integer && !Number.isInteger(n))) fail(integer ? 'a whole number' : 'a number');
    if (spec.min !== undefined && n < spec.min) fail(`a number ≥ ${spec.min}`);
    if (spec.max !== undefined && n > spec.max) fail(`a number ≤ ${spec.max}`);
    return n;
  };
  const allowed = (v) => {
    if (spec.oneOf && !spec.oneOf.includes(v)) fail(spec.oneOf.join(' or '));
    return v;
  };
  switch (spec.type) {
    case 'boolean':
      return raw;
    case 'number':
      return number(raw, false);
    case 'integer':
      return number(raw, true);
    case 'path':
      return path.resolve(raw);
    case 'cpus':
      return CPUS.test(raw) ? raw : fail('a CPU list such as 1 or 0,2-3');
    case 'list': {
      const items = raw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      return items.map((v) => (spec.of === 'integer' ? number(v, true) : allowed(v)));
    }
    default:
      return allowed(raw);
  }
}

/** The --help text of `script` (e.g. `scripts/bench/gateway.mjs`) from its options table. */
export function usage(script, about, table) {
  const rows = Object.entries(table).map(([name, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : ''}--${name}${o.type === 'boolean' ? '' : ` <${o.oneOf ? o.oneOf.join('|') : o.type}>`}`;
    const dflt = o.default === undefined || o.default === false ? '' : ` (default ${Array.isArray(o.default) ? o.default.join(',') : o.default})`;
    return [flag, `${o.help}${dflt}`];
  });
  const width = Math.max(...rows.map(([f]) => f.length));
  return `usage: node ${script} [options]\n\n${about}\n\n${rows.map(([f, h]) => `  ${f.padEnd(width)}  ${h}`).join('\n')}\n  ${'-h, --help'.padEnd(width)}  this text`;
}

/**
 * Reads `argv` (default the process's) against `table`: values converted and checked, defaults filled in, `--help`
 * printed and the process ended. Unknown options and bad values throw, naming the option.
 */
export function parseOptions(script, about, table, argv = process.argv.slice(2)) {
  const options = { help: { type: 'boolean', short: 'h' } };
  for (const [name, o] of Object.entries(table))
    options[name] = { type: o.type === 'boolean' ? 'boolean' : 'string', ...(o.short ? { short: o.short } : {}) };
  // `--name value` joined as `--name=value` first: parseArgs refuses a value that starts with a dash after a
  // separate option (`--nice -19`, `--nodeArgs '--trace-gc'`), which these scripts have always taken.
  const args = [];
  for (let i = 0; i < argv.length; i++) {
    const name = /^--([^=]+)$/.exec(argv[i])?.[1];
    if (name && table[name] && table[name].type !== 'boolean' && i + 1 < argv.length) args.push(`${argv[i]}=${argv[++i]}`);
    else args.push(argv[i]);
  }
  let parsed;
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (e) {
    throw new Error(`${e.message.split('. ')[0]} (--help lists the options)`);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(usage(script, about, table));
    process.exit(0);
  }
  const byPosition = Object.entries(table).filter(([, o]) => o.positional);
  if (positionals.length > byPosition.length) throw new Error(`unexpected argument ${positionals[byPosition.length]} (--help lists the options)`);
  positionals.forEach((v, i) => {
    const [name] = byPosition[i];
    if (values[name] === undefined) values[name] = v;
  });
  const out = {};
  for (const [name, o] of Object.entries(table)) out[name] = values[name] === undefined ? o.default : convert(name, o, values[name]);
  return out;
}

/** The median of the finite numbers in `xs` (the mean of the middle two for an even count); NaN when none. */
export function median(xs) {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** The options of a script that pins the proxy under test to one CPU and everything else to another. */
export const PIN_OPTIONS = {
  proxyCpu: { type: 'integer', min: 0, default: 1, help: 'CPU the proxy under test is pinned to' },
  loadCpu: { type: 'integer', min: 0, default: 0, help: 'CPU everything else (backend, daemon, load) is pinned to' },
  noPin: { type: 'boolean', help: 'pin nothing' },
};

/** The command prefix that pins a child to `cpu` with taskset, or none when `pin` is off. */
export function pinPrefix(pin, cpu) {
  return pin ? ['taskset', '-c', String(cpu)] : [];
}

/**
 * Why the proxy and the load cannot be pinned to `proxyCpu` and `loadCpu` here (one CPU, no taskset, a CPU
 * missing, or the same one twice); undefined when they can.
 */
export function cannotPin(proxyCpu, loadCpu) {
  const ncpu = availableParallelism();
  const taskset = spawnSync('taskset', ['-c', '0', 'true']);
  if (ncpu < 2 || taskset.status !== 0 || Math.max(proxyCpu, loadCpu) >= ncpu || proxyCpu === loadCpu) {
    return `${ncpu} cpu(s), taskset ${taskset.status === 0 ? 'available' : 'missing'}, proxyCpu ${proxyCpu}, loadCpu ${loadCpu}`;
  }
  return undefined;
}
