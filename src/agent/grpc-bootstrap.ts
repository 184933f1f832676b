// The bootstrap file proxyless gRPC clients read from GRPC_XDS_BOOTSTRAP (Istio's grpcxds package): the
// agent's local xDS socket as the only server, the node with GENERATOR=grpc so the daemon answers with
// gRPC-flavoured resources, and the listener name template gRPC servers use. Pure.
import path from 'node:path';
import type { JsonObject } from '@bufbuild/protobuf';
import type { Locality } from './node';

/** gRPC servers subscribe to `xds.istio.io/grpc/lds/inbound/<ip:port>` (the daemon serves that name). */
export const SERVER_LISTENER_NAME_TEMPLATE = 'xds.istio.io/grpc/lds/inbound/%s';

export interface GrpcBootstrapInputs {
  nodeId: string;
  locality?: Locality;
  metadata: JsonObject;
  /** The agent's xDS socket; made absolute against `cwd`. */
  xdsSocketPath: string;
  cwd: string;
  /** OUTPUT_CERTS: where key.pem, cert-chain.pem and root-cert.pem are written, when set. */
  certDir?: string;
}

export function grpcBootstrap(i: GrpcBootstrapInputs): JsonObject {
  const locality: JsonObject = {};
  if (i.locality?.region) locality['region'] = i.locality.region;
  if (i.locality?.zone) locality['zone'] = i.locality.zone;
  if (i.locality?.subZone) locality['sub_zone'] = i.locality.subZone;
  const node: JsonObject = { id: i.nodeId, metadata: { ...i.metadata, GENERATOR: 'grpc' } };
  if (Object.keys(locality).length) node['locality'] = locality;
  const out: JsonObject = {
    xds_servers: [
      {
        server_uri: `unix://${path.resolve(i.cwd, i.xdsSocketPath)}`,
        channel_creds: [{ type: 'insecure' }],
        server_features: ['xds_v3'],
      },
    ],
    node,
    server_listener_resource_name_template: SERVER_LISTENER_NAME_TEMPLATE,
  };
  if (i.certDir) {
    out['certificate_providers'] = {
      default: {
        plugin_name: 'file_watcher',
        config: {
          certificate_file: path.join(i.certDir, 'cert-chain.pem'),
          private_key_file: path.join(i.certDir, 'key.pem'),
          ca_certificate_file: path.join(i.certDir, 'root-cert.pem'),
          refresh_interval: '900s',
        },
      },
    };
  }
  return out;
}
