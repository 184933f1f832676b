// The agent's hand-written CreateCertificate messages must be exactly the generated schema's: requests
// byte for byte what toBinary writes, responses read as fromBinary reads them (Istio's CA and ours answer
// with protobuf's encoder, which may add fields a newer proto has).
import t from 'tap';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { IstioCertificateRequestSchema, IstioCertificateResponseSchema, IstioCertificateService } from '../../src/gen/security/v1alpha1/ca_pb';
import { grpcMethodPath } from '../../src/lib/xds/grpc';
import {
  CREATE_CERTIFICATE_PATH,
  decodeCertificateResponse,
  encodeCertificateRequest,
  type CertificateRequest,
} from '../../src/agent/identity/ca-wire';
import { WireError } from '../../src/lib/protowire';

const CSR = '-----BEGIN CERTIFICATE REQUEST-----\nMIIBMzCB2gIBADAAMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END CERTIFICATE REQUEST-----\n';

const requests: Array<[string, CertificateRequest]> = [
  ["the agent's request", { csr: CSR, validityDuration: 86400n, metadata: { CertSigner: '' } }],
  ['a named signer', { csr: CSR, validityDuration: 3600n, metadata: { CertSigner: 'clusterissuers.cert-manager.io/mesh' } }],
  ['no metadata', { csr: CSR, validityDuration: 60n }],
  ['empty metadata', { csr: CSR, validityDuration: 60n, metadata: {} }],
  ['zero TTL (the server default)', { csr: CSR, validityDuration: 0n, metadata: { CertSigner: '' } }],
  ['negative TTL', { csr: CSR, validityDuration: -5n }],
  ['the largest TTL', { csr: CSR, validityDuration: 9223372036854775807n }],
  ['empty CSR', { csr: '', validityDuration: 1n }],
  ['several keys, non-ASCII', { csr: 'é✓', validityDuration: 300n, metadata: { CertSigner: 'x', ImpersonatedIdentity: 'spiffe://td/ns/é/sa/✓' } }],
  ['a long CSR (multi-byte lengths)', { csr: CSR.repeat(200), validityDuration: 123456789n, metadata: { CertSigner: 'y'.repeat(300) } }],
];

t.test('requests: the bytes toBinary writes', async (t) => {
  for (const [name, r] of requests) {
    const want = toBinary(IstioCertificateRequestSchema, create(IstioCertificateRequestSchema, r));
    t.same([...encodeCertificateRequest(r)], [...want], name);
  }
});

t.test('responses: what fromBinary reads, unknown fields skipped', async (t) => {
  const chains = [
    [],
    ['leaf'],
    ['-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n', 'root ✓', ''],
    Array.from({ length: 5 }, (_, i) => 'x'.repeat(1000 * i)),
  ];
  for (const certChain of chains) {
    const bytes = toBinary(IstioCertificateResponseSchema, create(IstioCertificateResponseSchema, { certChain }));
    t.same(
      decodeCertificateResponse(bytes).certChain,
      fromBinary(IstioCertificateResponseSchema, bytes).certChain,
      `${certChain.length} certificates`,
    );
    // Fields a newer proto may add: varint 2, fixed64 3, bytes 4, fixed32 5 — before and after.
    const unknown = Buffer.from([0x10, 0x96, 0x01, 0x19, 1, 2, 3, 4, 5, 6, 7, 8, 0x22, 0x02, 0x61, 0x62, 0x2d, 9, 9, 9, 9]);
    const withUnknown = Buffer.concat([unknown, bytes, unknown]);
    t.same(
      decodeCertificateResponse(withUnknown).certChain,
      fromBinary(IstioCertificateResponseSchema, withUnknown).certChain,
      `${certChain.length} certificates among unknown fields`,
    );
  }
});

t.test('malformed responses are refused', async (t) => {
  const bad: Array<[string, number[]]> = [
    ['a length past the end', [0x0a, 0x05, 0x61]],
    ['a truncated varint', [0x10, 0x80]],
    ['a truncated fixed64', [0x19, 1, 2]],
    ['cert_chain as a varint', [0x08, 0x01]],
    ['invalid UTF-8', [0x0a, 0x01, 0xff]],
    ['a group wire type', [0x0b]],
    ['field number 0', [0x02, 0x00]],
  ];
  for (const [name, bytes] of bad) {
    let thrown: unknown;
    try {
      decodeCertificateResponse(Uint8Array.from(bytes));
    } catch (e) {
      thrown = e;
    }
    t.ok(thrown instanceof WireError, `${name}: ${String(thrown)}`);
  }
});

t.test("the method path is the service descriptor's", async (t) => {
  t.equal(CREATE_CERTIFICATE_PATH, grpcMethodPath(IstioCertificateService, IstioCertificateService.method.createCertificate));
});
