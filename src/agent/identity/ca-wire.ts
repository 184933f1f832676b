// The wire form of istio.v1.auth.IstioCertificateService/CreateCertificate for the agent's CA client, written
// by hand (src/lib/protowire.ts) instead of through the generated schema: the first certificate is on a pod's
// way to ready, and the protobuf runtime with its descriptors costs ~30–90 ms to load, which the agent then
// pays after asking, not before. test/agent/ca-wire.test.ts holds the bytes equal to toBinary/fromBinary of
// proto/security/v1alpha1/ca.proto's messages.
import type { IstioCertificateRequest, IstioCertificateResponse } from '../../gen/security/v1alpha1/ca_pb';
import {
  concat,
  int64Field,
  lengthDelimited,
  presentStringField,
  readFields,
  readString,
  stringField,
  WireError,
  WIRE_LENGTH_DELIMITED,
} from '../../lib/protowire';

/** The HTTP/2 path of the method (gRPC's `/package.Service/Method`). */
export const CREATE_CERTIFICATE_PATH = '/istio.v1.auth.IstioCertificateService/CreateCertificate';

export type CertificateRequest = Pick<IstioCertificateRequest, 'csr' | 'validityDuration'> & {
  /** google.protobuf.Struct with string values only (Istio's agent sends CertSigner and nothing else). */
  metadata?: Record<string, string>;
};

/** google.protobuf.Value{string_value = 3}. */
function stringValue(s: string): Buffer {
  return presentStringField(3, s);
}

/** google.protobuf.Struct{map<string, Value> fields = 1}: one entry {key = 1, value = 2} per field. */
function struct(fields: Record<string, string>): Buffer {
  return concat(Object.entries(fields).map(([k, v]) => lengthDelimited(1, concat([presentStringField(1, k), lengthDelimited(2, stringValue(v))]))));
}

/** IstioCertificateRequest{csr = 1, validity_duration = 3, metadata = 4}. */
export function encodeCertificateRequest(r: CertificateRequest): Buffer {
  return concat([stringField(1, r.csr), int64Field(3, r.validityDuration), r.metadata ? lengthDelimited(4, struct(r.metadata)) : undefined]);
}

/** IstioCertificateResponse{repeated string cert_chain = 1}; other fields are skipped as unknown. */
export function decodeCertificateResponse(bytes: Uint8Array): Pick<IstioCertificateResponse, 'certChain'> {
  const certChain: string[] = [];
  for (const f of readFields(bytes)) {
    if (f.field !== 1) continue;
    if (f.wireType !== WIRE_LENGTH_DELIMITED) throw new WireError(`cert_chain has wire type ${f.wireType}, expected a string`);
    certChain.push(readString(f.bytes!));
  }
  return { certChain };
}
