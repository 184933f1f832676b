// Envoy-style component loggers for the data-plane engine. The agent starts the engine with Envoy's
// flags (--log-level, --component-log-level, --log-format) and reads/changes levels through the admin
// `/logging` endpoint, so levels, logger names and line layout follow Envoy (spdlog patterns), not the
// Istio-style scopes of src/lib/log.

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warning', 'error', 'critical', 'off'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Envoy's logger ids that this engine writes to (a subset of Envoy's list, same names). */
export const COMPONENTS = [
  'admin',
  'config',
  'connection',
  'conn_handler',
  'dns',
  'filter',
  'grpc',
  'hc',
  'http',
  'http2',
  'init',
  'jwt',
  'main',
  'misc',
  'pool',
  'rbac',
  'router',
  'runtime',
  'secret',
  'upstream',
  'tracing',
] as const;
export type Component = (typeof COMPONENTS)[number];

/** Envoy accepts `warn` and `err` too. */
export function parseLogLevel(s: string): LogLevel | undefined {
  const v = s.trim().toLowerCase();
  if (v === 'warn') return 'warning';
  if (v === 'err') return 'error';
  return (LOG_LEVELS as readonly string[]).includes(v) ? (v as LogLevel) : undefined;
}

const RANK: Record<LogLevel, number> = { trace: 0, debug: 1, info: 2, warning: 3, error: 4, critical: 5, off: 6 };
const SHORT: Record<LogLevel, string> = { trace: 'T', debug: 'D', info: 'I', warning: 'W', error: 'E', critical: 'C', off: 'O' };

/** Envoy's default pattern. */
export const DEFAULT_LOG_FORMAT = '[%Y-%m-%d %T.%e][%t][%l][%n] %v';

type Piece = string | ((e: { level: LogLevel; name: string; msg: string; now: Date }) => string);

const pad = (n: number, w = 2) => String(n).padStart(w, '0');

/** Compiles the spdlog flags Envoy documents for --log-format (times are UTC). */
export function compileLogFormat(pattern: string): Piece[] {
  const out: Piece[] = [];
  let lit = '';
  const flush = () => {
    if (lit) out.push(lit);
    lit = '';
  };
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c !== '%' || i === pattern.length - 1) {
      lit += c;
      continue;
    }
    const f = pattern[++i]!;
    let p: Piece | undefined;
    switch (f) {
      case 'Y':
        p = (e) => String(e.now.getUTCFullYear());
        break;
      case 'm':
        p = (e) => pad(e.now.getUTCMonth() + 1);
        break;
      case 'd':
        p = (e) => pad(e.now.getUTCDate());
        break;
      case 'H':
        p = (e) => pad(e.now.getUTCHours());
        break;
      case 'M':
        p = (e) => pad(e.now.getUTCMinutes());
        break;
      case 'S':
        p = (e) => pad(e.now.getUTCSeconds());
        break;
      case 'T':
        p = (e) => `${pad(e.now.getUTCHours())}:${pad(e.now.getUTCMinutes())}:${pad(e.now.getUTCSeconds())}`;
        break;
      case 'e':
        p = (e) => pad(e.now.getUTCMilliseconds(), 3);
        break;
      case 'f':
        p = (e) => pad(e.now.getUTCMilliseconds() * 1000, 6);
        break;
      case 'F':
        p = (e) => pad(e.now.getUTCMilliseconds() * 1_000_000, 9);
        break;
      case 'l':
        p = (e) => e.level;
        break;
      case 'L':
        p = (e) => SHORT[e.level];
        break;
      case 'n':
        p = (e) => e.name;
        break;
      case 'v':
        p = (e) => e.msg;
        break;
      case 'j':
        p = (e) => JSON.stringify(e.msg).slice(1, -1);
        break;
      case '_':
        p = (e) => JSON.stringify(e.msg).slice(1, -1);
        break;
      case 't':
        p = () => String(process.pid);
        break;
      case 'P':
        p = () => String(process.pid);
        break;
      case 'g':
      case 's':
        p = (e) => `source/${e.name}`;
        break;
      case '#':
        p = () => '0';
        break;
      case '%':
        lit += '%';
        continue;
      default:
        lit += `%${f}`;
        continue;
    }
    flush();
    out.push(p);
  }
  flush();
  return out;
}

export type LogWriter = (line: string) => void;

export class LoggerRegistry {
  private readonly levels = new Map<string, LogLevel>();
  private format: Piece[] = compileLogFormat(DEFAULT_LOG_FORMAT);
  private readonly cache = new Map<string, Logger>();

  constructor(
    level: LogLevel = 'info',
    private write: LogWriter = (l) => process.stderr.write(l),
  ) {
    for (const c of COMPONENTS) this.levels.set(c, level);
  }

  setWriter(w: LogWriter): void {
    this.write = w;
  }

  setFormat(pattern: string): void {
    this.format = compileLogFormat(pattern);
  }

  setAll(level: LogLevel): void {
    for (const k of this.levels.keys()) this.levels.set(k, level);
  }

  /** false when no such logger exists (Envoy answers 404 for unknown names). */
  set(name: string, level: LogLevel): boolean {
    if (!this.levels.has(name)) return false;
    this.levels.set(name, level);
    return true;
  }

  /** `upstream:debug,connection:trace`; throws naming the bad entry. */
  applyComponentLevels(spec: string): void {
    for (const part of spec
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)) {
      const [name, lvl] = part.split(':');
      const level = lvl === undefined ? undefined : parseLogLevel(lvl);
      if (!name || !level) throw new Error(`error: component log level '${part}' is not valid: want <component>:<level>`);
      if (!this.set(name, level)) throw new Error(`error: invalid component specified '${name}'`);
    }
  }

  entries(): Array<[string, LogLevel]> {
    return [...this.levels.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  }

  level(name: string): LogLevel {
    return this.levels.get(name) ?? 'info';
  }

  get(name: Component): Logger {
    let l = this.cache.get(name);
    if (!l) {
      l = new Logger(this, name);
      this.cache.set(name, l);
    }
    return l;
  }

  /** @internal */
  emit(level: LogLevel, name: string, msg: string): void {
    const e = { level, name, msg, now: new Date() };
    let line = '';
    for (const p of this.format) line += typeof p === 'string' ? p : p(e);
    this.write(`${line}\n`);
  }
}

export class Logger {
  constructor(
    private readonly reg: LoggerRegistry,
    readonly name: string,
  ) {}

  enabled(level: LogLevel): boolean {
    return RANK[level] >= RANK[this.reg.level(this.name)] && level !== 'off';
  }
  trace(msg: string): void {
    if (this.enabled('trace')) this.reg.emit('trace', this.name, msg);
  }
  debug(msg: string): void {
    if (this.enabled('debug')) this.reg.emit('debug', this.name, msg);
  }
  info(msg: string): void {
    if (this.enabled('info')) this.reg.emit('info', this.name, msg);
  }
  warn(msg: string): void {
    if (this.enabled('warning')) this.reg.emit('warning', this.name, msg);
  }
  error(msg: string): void {
    if (this.enabled('error')) this.reg.emit('error', this.name, msg);
  }
  critical(msg: string): void {
    if (this.enabled('critical')) this.reg.emit('critical', this.name, msg);
  }
}
