// The node this engine says it is, in xDS requests and in the config dump: the bootstrap's node with Envoy's
// user agent, build version and extension list (Envoy's InstanceBase::initialize), and how to name it to an operator.
import { create } from '@bufbuild/protobuf';
import { BuildVersionSchema, NodeSchema, type Node } from '../../gen/envoy/config/core/v3/base_pb';
import { buildInfo } from '../../lib/buildinfo';
import { engineExtensions } from '../extensions';
import type { HttpFilterRegistry } from '../http/filter-api';

export const ENVOY_API_VERSION = '1.34.0';

/** The engine's version as Envoy prints its own (`<sha>/<version>/<status>/RELEASE/<ssl>`): /server_info, trace scopes. */
export function engineVersion(): string {
  const b = buildInfo();
  return `${b.revision}/${ENVOY_API_VERSION}/${b.status}/RELEASE/mesh-${b.version}/node${process.versions.node}`;
}

/** `node <id> with labels {k: v, …}`: how an operator recognises this proxy in a warning. */
export function nodeText(node: Node): string {
  const labels = node.metadata?.['LABELS'];
  const entries =
    labels && typeof labels === 'object' && !Array.isArray(labels)
      ? Object.entries(labels).map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)
      : [];
  return `node ${node.id || '(no id)'} with labels {${entries.sort().join(', ')}}`;
}

/**
 * As Envoy's server does at start (InstanceBase::initialize): the node names this build, whatever the
 * bootstrap said, in xDS requests and in the bootstrap of the config dump (`meshctl pc bootstrap` prints it
 * as "Envoy Version"), with Envoy's BuildVersion metadata keys (the version is the Envoy API we follow), and
 * lists the extensions the engine has, as Envoy lists its own (the daemon reads them: capabilities.ts).
 */
export function withUserAgent(n: Node | undefined, filters: HttpFilterRegistry): Node {
  const node = create(NodeSchema, n ?? {});
  node.userAgentName = 'envoy';
  const [majorNumber, minorNumber, patch] = ENVOY_API_VERSION.split('.').map(Number) as [number, number, number];
  const b = buildInfo();
  node.userAgentVersionType = {
    case: 'userAgentBuildVersion',
    value: create(BuildVersionSchema, {
      version: { majorNumber, minorNumber, patch },
      metadata: {
        'revision.sha': b.revision,
        'revision.status': b.status,
        'build.type': 'RELEASE',
        'ssl.version': `OpenSSL/${process.versions.openssl}`,
      },
    }),
  };
  if (node.extensions.length === 0) node.extensions = engineExtensions(filters);
  return node;
}
