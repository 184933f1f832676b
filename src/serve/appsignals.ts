// In-process "signals" (Istio's pkg/appsignals): components subscribe to a named signal, and ControlZ's
// Signals page raises it remotely. The operating-system SIGUSR1 is not hooked: Node.js reserves it for
// starting the inspector.
import { registerScope } from '../lib/log';

const log = registerScope('default');

export type AppSignal = 'SIGUSR1';
export type AppSignalHandler = (signal: AppSignal, source: string) => void;

const watchers = new Set<AppSignalHandler>();

/** Subscribes to app signals; returns the unsubscribe function. */
export function watchAppSignals(handler: AppSignalHandler): () => void {
  watchers.add(handler);
  return () => watchers.delete(handler);
}

/** Raises `signal` for every watcher; returns how many were notified. */
export function notifyAppSignal(signal: AppSignal, source: string): number {
  log.info(`received ${signal} from ${source}; notifying ${watchers.size} watcher(s)`);
  for (const w of watchers) {
    try {
      w(signal, source);
    } catch (e) {
      log.error(`${signal} watcher failed: ${(e as Error).message}`);
    }
  }
  return watchers.size;
}

export function appSignalWatcherCount(): number {
  return watchers.size;
}
