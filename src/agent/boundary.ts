// Fault containment for the agent's side subsystems. Istio runs Envoy as a separate process, so a bug in the
// agent's DNS proxy, SDS server, health prober, xDS proxy, status server or metrics merge can never take the
// data plane down with it. mesh runs its engine inside the agent's process: an exception escaping one of
// those subsystems would end every connection of the pod. Each subsystem therefore runs behind this one
// boundary:
//  - its entry points (request handlers, socket and stream 'data' handlers, timer ticks) are wrapped with
//    entry(): a throw or a rejected promise there is that subsystem's fault, answered by the entry's fallback;
//  - its start (and every restart) runs inside run(), so the sockets, servers, timers and promises it makes
//    carry the subsystem in their async context (AsyncLocalStorage). What still escapes from one of them
//    reaches the last line, install(): the process's uncaughtException / unhandledRejection handler, which
//    attributes it by that context. An exception with no subsystem (the engine's own) ends the process as
//    Node would, as an Envoy crash ends Envoy.
// A fault is logged with its subsystem, counted (agent_subsystem_faults_total{subsystem}), and the subsystem
// is restarted after a backoff; one that faults more than `maxFaults` times within `windowMs` is disabled
// (stopped for good), unless it is one the pod cannot do without (the status server answers kubelet's probes).
// Differs from Istio on purpose: Istio's agent has no such boundary (a Go panic outside net/http's own
// per-request recovery ends pilot-agent); its readiness does not depend on these subsystems once Envoy is
// ready, and that is what the agent keeps reporting while one of them is restarted or disabled.
import { AsyncLocalStorage } from 'node:async_hooks';
import { registerScope } from '../lib/log';
import { defineCounter } from '../lib/metrics';

const log = registerScope('default');

export const SUBSYSTEMS = ['dns', 'sds', 'health', 'xds-proxy', 'status', 'metrics'] as const;
export type Subsystem = (typeof SUBSYSTEMS)[number];

export function isSubsystem(s: string): s is Subsystem {
  return (SUBSYSTEMS as readonly string[]).includes(s);
}

export const subsystemFaults = defineCounter<'subsystem'>({
  name: 'agent_subsystem_faults_total',
  help: 'Exceptions contained in a subsystem of the agent (the subsystem was restarted or disabled; the proxy kept serving).',
  labelNames: ['subsystem'],
});

/** How the boundary brings a subsystem back, or stops it for good. */
export interface SubsystemControl {
  restart(): Promise<void>;
  disable(): Promise<void>;
  /** Never disabled, only restarted (with backoff): the pod cannot do without it. */
  essential?: boolean;
}

/** What a subsystem's code sees of the boundary: a way to wrap its entry points. */
export interface Guard {
  /**
   * `fn` as an entry point of `subsystem`: it runs in the subsystem's context, and a throw or a rejected
   * promise from it is the subsystem's fault, answered by `fallback` with the same arguments.
   */
  entry<A extends unknown[], R>(subsystem: Subsystem, fn: (...a: A) => R, fallback: (e: Error, ...a: A) => R): (...a: A) => R;
}

/** For code run without an agent around it (tests of one part): entry points as they are. */
export const UNGUARDED: Guard = { entry: (_s, fn) => fn };

/** The exception the test-only hook throws (see armTestFaults). */
export class InjectedFault extends Error {
  override name = 'InjectedFault';
}

type State = 'running' | 'restarting' | 'disabled';

export interface BoundaryOptions {
  /** Faults within windowMs beyond which a subsystem is disabled. */
  maxFaults?: number;
  windowMs?: number;
  /** First restart delay, doubled for each further fault within the window. */
  restartDelayMs?: number;
  maxRestartDelayMs?: number;
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return typeof (v as { then?: unknown } | null)?.then === 'function';
}

export class FaultBoundary implements Guard {
  private readonly context = new AsyncLocalStorage<Subsystem>();
  private readonly controls = new Map<Subsystem, SubsystemControl>();
  private readonly recent = new Map<Subsystem, number[]>();
  private readonly states = new Map<Subsystem, State>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Subsystems whose next entry throws (test-only, see armTestFaults). */
  private readonly armedEntries = new Set<Subsystem>();
  private readonly maxFaults: number;
  private readonly windowMs: number;
  private readonly restartDelayMs: number;
  private readonly maxRestartDelayMs: number;
  private closed = false;

  constructor(o: BoundaryOptions = {}) {
    this.maxFaults = o.maxFaults ?? 5;
    this.windowMs = o.windowMs ?? 60_000;
    this.restartDelayMs = o.restartDelayMs ?? 100;
    this.maxRestartDelayMs = o.maxRestartDelayMs ?? 10_000;
  }

  /** Says how `name` is restarted and disabled; without it a fault is only logged and counted. */
  register(name: Subsystem, control: SubsystemControl): void {
    this.controls.set(name, control);
    this.states.set(name, 'running');
  }

  state(name: Subsystem): State | undefined {
    return this.states.get(name);
  }

  /** Runs `fn` (a subsystem's start) in the subsystem's context: what it creates carries the subsystem. */
  run<T>(name: Subsystem, fn: () => T): T {
    return this.context.run(name, fn);
  }

  /** The subsystem whose code is running now, if any. */
  current(): Subsystem | undefined {
    return this.context.getStore();
  }

  entry<A extends unknown[], R>(name: Subsystem, fn: (...a: A) => R, fallback: (e: Error, ...a: A) => R): (...a: A) => R {
    return (...a: A): R =>
      this.context.run(name, () => {
        try {
          if (this.armedEntries.delete(name)) throw new InjectedFault(`fault injected into ${name} at an entry point (MESH_TEST_FAULT)`);
          const r = fn(...a);
          if (!isThenable(r)) return r;
          return Promise.resolve(r).catch((e: unknown) => {
            this.fault(name, e);
            return fallback(asError(e), ...a);
          }) as R;
        } catch (e) {
          this.fault(name, e);
          return fallback(asError(e), ...a);
        }
      });
  }

  /** An exception of `name`: logged, counted, and the subsystem restarted (after a backoff) or disabled. */
  fault(name: Subsystem, e: unknown): void {
    const err = asError(e);
    subsystemFaults.inc({ subsystem: name });
    const state = this.states.get(name);
    if (state === 'disabled') {
      log.warn(`${name} (disabled) failed again: ${err.message}`, { subsystem: name });
      return;
    }
    log.error(`${name} failed: ${err.stack ?? err.message}`, { subsystem: name });
    const control = this.controls.get(name);
    if (!control || this.closed) return;
    const now = Date.now();
    const times = (this.recent.get(name) ?? []).filter((t) => now - t < this.windowMs);
    times.push(now);
    this.recent.set(name, times);
    if (times.length > this.maxFaults && !control.essential) {
      this.states.set(name, 'disabled');
      log.error(`${name} failed ${times.length} times within ${this.windowMs / 1000}s: disabled; the proxy keeps serving`, { subsystem: name });
      void this.run(name, () => control.disable()).catch((d: unknown) => log.error(`disabling ${name}: ${asError(d).message}`, { subsystem: name }));
      return;
    }
    // Faults that arrive while a restart is pending are counted, and make the next one wait longer.
    if (state === 'restarting') return;
    this.states.set(name, 'restarting');
    const delay = Math.min(this.maxRestartDelayMs, this.restartDelayMs * 2 ** (times.length - 1));
    log.info(`restarting ${name} in ${delay}ms; the proxy keeps serving`, { subsystem: name });
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (this.closed || this.states.get(name) !== 'restarting') return;
      this.run(name, () => control.restart()).then(
        () => {
          if (this.states.get(name) === 'restarting') this.states.set(name, 'running');
          log.info(`${name} restarted`, { subsystem: name });
        },
        (r: unknown) => {
          // A restart that fails is one more fault: the backoff grows, and the budget ends in disabling it.
          this.states.set(name, 'running');
          this.fault(name, new Error(`restart failed: ${asError(r).message}`));
        },
      );
    }, delay);
    this.timers.add(timer);
  }

  /**
   * The last line: exceptions and rejections that escaped every entry point are faults of the subsystem in
   * whose context they were raised; anything else ends the process as Node's default would. Returns the
   * function that removes the handlers.
   */
  install(proc: NodeJS.Process = process): () => void {
    const escaped = (e: unknown, how: string) => {
      const name = this.current();
      if (name) {
        this.fault(name, e);
        return;
      }
      const err = asError(e);
      process.stderr.write(`${how}: ${err.stack ?? err.message}\n`);
      proc.exit(1);
    };
    const onException = (e: Error) => escaped(e, 'uncaught exception');
    const onRejection = (r: unknown) => escaped(r, 'unhandled promise rejection');
    proc.on('uncaughtException', onException);
    proc.on('unhandledRejection', onRejection);
    return () => {
      proc.off('uncaughtException', onException);
      proc.off('unhandledRejection', onRejection);
    };
  }

  /** Test-only: the next entry of `name` throws (see armTestFaults). */
  armEntry(name: Subsystem): void {
    this.armedEntries.add(name);
  }

  /** Pending restarts are dropped: the agent is stopping. */
  close(): void {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}

/** One injection of MESH_TEST_FAULT: at the subsystem's next entry point, or escaping from its context. */
export interface TestFault {
  subsystem: Subsystem;
  at: 'entry' | 'escape';
}

/** `dns`, `status:entry`, … comma-separated; an unknown name is an error naming it. */
export function parseTestFaults(text: string): TestFault[] {
  const out: TestFault[] = [];
  for (const item of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [name, at = 'escape', ...rest] = item.split(':');
    if (!isSubsystem(name!) || (at !== 'entry' && at !== 'escape') || rest.length > 0) {
      throw new Error(`MESH_TEST_FAULT: ${JSON.stringify(item)} is not <subsystem>[:entry|:escape] (subsystems: ${SUBSYSTEMS.join(', ')})`);
    }
    out.push({ subsystem: name, at });
  }
  return out;
}

/**
 * The test-only fault hook. Production never sets MESH_TEST_FAULT; with it set, each SIGUSR2 the agent
 * receives injects the next fault of the list (round robin), so one agent can be shown each subsystem's
 * fault in turn: `:entry` makes the subsystem's next entry point throw, `:escape` (the default) throws from
 * a timer made in the subsystem's context — an exception no entry point sees, as one escaping from a socket
 * or timer callback deep in the subsystem would.
 */
export function armTestFaults(boundary: FaultBoundary, faults: readonly TestFault[], proc: NodeJS.Process = process): () => void {
  let next = 0;
  const inject = () => {
    const f = faults[next++ % faults.length]!;
    log.warn(`MESH_TEST_FAULT: injecting a fault into ${f.subsystem} (${f.at})`);
    if (f.at === 'entry') boundary.armEntry(f.subsystem);
    else
      boundary.run(f.subsystem, () =>
        setImmediate(() => {
          throw new InjectedFault(`fault injected into ${f.subsystem} (MESH_TEST_FAULT)`);
        }),
      );
  };
  proc.on('SIGUSR2', inject);
  log.warn(`MESH_TEST_FAULT is set (a test-only hook): each SIGUSR2 injects the next of ${faults.map((f) => `${f.subsystem}:${f.at}`).join(', ')}`);
  return () => proc.off('SIGUSR2', inject);
}
