// pilot_total_rejected_configs, shared by every place that rejects or ignores configuration
// (file source, orchestrator source, gateway merging). Labels as Istio's: `type` and `name`.
import { defineCounter } from '../lib/metrics';
import type { Kind } from './types';

export const totalRejectedConfigs = defineCounter({
  name: 'pilot_total_rejected_configs',
  help: 'Total number of configs that Pilot had to reject or ignore.',
  labelNames: ['type', 'name'] as const,
});

/**
 * Counts one rejected resource. `type` is the lower-case kind (`gateway`, `virtualservice`, as
 * Istio's gateway merging uses `gateway`) or `file` for a document that could not be identified;
 * `name` is `namespace/name` or the file.
 */
export function recordRejectedConfig(type: Lowercase<Kind> | 'file', name: string): void {
  totalRejectedConfigs.inc({ type, name });
}
