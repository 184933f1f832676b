// The ADS server as the daemon shell sees it (MeshdProviders.xds): its listeners, connections, shutdown,
// the debug push, and each connection's config dump built from what was last sent on it (Istio's
// /debug/config_dump?proxyID= answers from the connection's watched resources too).
import type { PushContext } from '../discovery/push-context';
import { configDumpJson, type TypedResources } from '../xds/config-dump';
import type { AdsServer } from '../xds/server';
import type { XdsServerHandle } from './providers';

type DebugPage = (name: string) => { status: number; body: string } | undefined;

export interface DaemonXds extends XdsServerHandle {
  /** The shell's internal debug pages, once it has set them (the syncz debug type serves them). */
  debugPage(name: string): ReturnType<DebugPage>;
}

/** `debugPush`: the push `/debug/adsz?push=true` asks for; answers how many proxies it goes to. */
export function xdsServerHandle(server: AdsServer<PushContext>, debugPush: () => number): DaemonXds {
  let debugPage: DebugPage | undefined;
  return {
    attach: (grpcServer, o) => server.attach(grpcServer, { secure: o.secure }),
    connections: () => server.connections(),
    forceDisconnect: (id) => server.forceDisconnect(id),
    stop: (graceMs) => server.stop(graceMs),
    pushAll: debugPush,
    setDebugPages: (page) => {
      debugPage = page;
    },
    debugPage: (name) => debugPage?.(name),
    configDump: (id, o) => {
      const con = server.connection(id);
      if (!con) return undefined;
      const byType = new Map<string, TypedResources>();
      for (const w of con.watches) {
        const got = server.resourcesFor(id, w.typeUrl);
        if (got) byType.set(w.typeUrl, { version: got.version, resources: got.resources, lastUpdated: w.lastSendTime });
      }
      return configDumpJson(byType, { includeEds: o.includeEds });
    },
  };
}
