// The suite's gRPC checks (Gateway API v1.3.0 conformance/utils/grpc/grpc.go: SendRPC, compareResponse), against
// the gRPC echo backend (test/helpers/echo-backend.ts): the method the request names, metadata and :authority sent,
// and the status code, fully qualified method, namespace and pod prefix expected.
import * as grpc from '@grpc/grpc-js';
import { decodeEchoResponse, GRPC_ECHO_SERVICE, type GrpcAssertions } from '../../helpers/echo-backend';
import type { GatewayRef } from './expect';

export interface GrpcExpectedResponse {
  $type: 'grpc.ExpectedResponse';
  EchoRequest?: object;
  EchoTwoRequest?: object;
  EchoThreeRequest?: object;
  RequestMetadata?: { Authority?: string; Metadata?: Record<string, string> };
  Response?: { Code?: number };
  Backend?: string;
  Namespace?: string;
  TestCaseName?: string;
  $gateway?: GatewayRef;
}

export function methodOf(e: GrpcExpectedResponse): string {
  return e.EchoRequest ? 'Echo' : e.EchoTwoRequest ? 'EchoTwo' : 'EchoThree';
}

/** One RPC through the gateway: its status code and, when OK, the backend's assertions. */
export function sendRpc(port: number, authority: string, e: GrpcExpectedResponse): Promise<{ code: number; assertions?: GrpcAssertions }> {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.default_authority': e.RequestMetadata?.Authority || authority,
  });
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(e.RequestMetadata?.Metadata ?? {})) md.set(k, v);
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      `/${GRPC_ECHO_SERVICE}/${methodOf(e)}`,
      (b: Buffer) => b,
      (b: Buffer) => b,
      Buffer.alloc(0),
      md,
      { deadline: Date.now() + 5_000 },
      (err, res) => {
        client.close();
        resolve(err ? { code: err.code } : { code: 0, assertions: decodeEchoResponse(res!) });
      },
    );
  });
}

/** compareResponse: undefined when the answer meets the expectation, else why not. */
export function compareRpc(e: GrpcExpectedResponse, r: { code: number; assertions?: GrpcAssertions }): string | undefined {
  const want = e.Response?.Code ?? 0;
  if (want !== r.code) return `expected status code to be ${want}, but got ${r.code}`;
  if (r.code !== 0) return undefined;
  const a = r.assertions!;
  const method = `/${GRPC_ECHO_SERVICE}/${methodOf(e)}`;
  if (a.fullyQualifiedMethod !== method) return `expected path to be ${method}, got ${a.fullyQualifiedMethod}`;
  if (e.Namespace && e.Namespace !== a.context.namespace) return `expected namespace to be ${e.Namespace}, got ${a.context.namespace}`;
  if (!a.context.pod.startsWith(e.Backend ?? '')) return `expected pod name to start with ${e.Backend}, got ${a.context.pod}`;
  return undefined;
}
