// The agent's DNS proxy (Istio's pilot-agent isDNSServerEnabled and DNS options): on when the node metadata
// asks for DNS capture on a sidecar, or for the server outright.
import type { JsonObject } from '@bufbuild/protobuf';
import { parseGoBool } from '../../lib/gostrconv';
import type { LocalDnsServerOptions } from '../../dns/server';
import type { NodeType } from '../config';
import type { PrepareStep } from './inputs';

export function prepareDns(s: PrepareStep, nodeType: NodeType, metadata: JsonObject, dnsDomain: string): LocalDnsServerOptions | undefined {
  // Read from the node metadata, which merges proxyMetadata, MESH_META_* and Istio's ISTIO_META_* spellings.
  const metaBool = (key: string): boolean => {
    const v = metadata[key];
    if (v === undefined || v === '') return false;
    try {
      return typeof v === 'boolean' ? v : parseGoBool(String(v));
    } catch {
      s.notes.push(`node metadata ${key}=${JSON.stringify(v)} is not a boolean: read as false`);
      return false;
    }
  };
  // Istio's isDNSServerEnabled: capture on a sidecar (gateways rarely need it), or the server asked for outright.
  const dnsServer = (metaBool('DNS_CAPTURE') && nodeType === 'sidecar') || metaBool('ENABLE_DNS_SERVER');
  if (!dnsServer) return undefined;
  const dns: LocalDnsServerOptions = {
    address: s.env.string('DNS_PROXY_ADDR'),
    proxyNamespace: s.ctx.env['POD_NAMESPACE'] ?? '',
    proxyDomain: dnsDomain,
    forwardParallel: s.env.bool('DNS_FORWARD_PARALLEL'),
  };
  s.info.push(`DNS proxy on ${dns.address || 'localhost:15053'}: readiness waits for the DNS name table from the discovery daemon`);
  return dns;
}
