// The self-monitoring surface (:15014): `/metrics` in Prometheus text, `/version`, and the daemon-level
// metrics of spec doc 1 §4.5 this module owns: meshd_uptime_seconds, pilot_info, mesh_build,
// pilot_services and pilot_virt_services (the last two read from the providers at scrape time).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { buildInfo, type BuildInfo } from '../lib/buildinfo';
import { recordComponentBuildTag } from '../lib/build-metric';
import { defineGauge, METRICS_CONTENT_TYPE, metricsText } from '../lib/metrics';
import { isLoopbackAddress } from '../serve/address';
import { writeText } from '../serve/router';
import type { MeshdProviders } from './providers';

/** What the scrape-time gauges read; set by the running daemon. */
interface MetricsSource {
  startedAt: number;
  providers: MeshdProviders;
}
let source: MetricsSource | undefined;

defineGauge({
  name: 'meshd_uptime_seconds',
  help: 'Current meshd server uptime in seconds',
  collect() {
    if (source) this.set((Date.now() - source.startedAt) / 1000);
  },
});
defineGauge({
  name: 'pilot_services',
  help: 'Total services known to pilot.',
  collect() {
    if (source) this.set(source.providers.services().length);
  },
});
defineGauge({
  name: 'pilot_virt_services',
  help: 'Total virtual services known to pilot.',
  collect() {
    if (source) this.set(source.providers.configs().filter((c) => c.kind === 'VirtualService').length);
  },
});
const pilotInfo = defineGauge<'version'>({ name: 'pilot_info', help: 'Pilot version and build information.', labelNames: ['version'] });

/** Istio's BuildInfo.String(): `<version>-<revision>-<status>`, served by /version and in pilot_info. */
export function versionString(b: BuildInfo = buildInfo()): string {
  return `${b.version}-${b.revision}-${b.status}`;
}

/** Points the scrape-time gauges at a running daemon and records the build metrics. */
export function recordDaemonMetrics(providers: MeshdProviders, startedAt: number): void {
  source = { providers, startedAt };
  const b = buildInfo();
  pilotInfo.set({ version: versionString(b) }, 1);
  recordComponentBuildTag('pilot', b.tag);
}

/** Stops the scrape-time gauges from reading a daemon that has shut down. */
export function clearDaemonMetrics(providers: MeshdProviders): void {
  if (source?.providers === providers) source = undefined;
}

/** `/metrics`; with METRICS_LOCALHOST_ACCESS_ONLY only loopback clients get an answer (403 otherwise, as Istio). */
export function metricsHandler(localhostOnly: boolean) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (localhostOnly && !isLoopbackAddress(req.socket.remoteAddress)) {
      writeText(res, 403, 'Only requests from localhost are allowed\n');
      return;
    }
    writeText(res, 200, await metricsText(), METRICS_CONTENT_TYPE);
  };
}

export function versionHandler(_req: IncomingMessage, res: ServerResponse): void {
  writeText(res, 200, versionString());
}
