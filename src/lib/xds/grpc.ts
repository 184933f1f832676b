// Adapter between protobuf-es generated service descriptors (src/gen/**) and @grpc/grpc-js: the same
// descriptor gives the server a ServiceDefinition and tests/agents a typed client, so both ends speak the
// real protos (binary wire format via toBinary/fromBinary) without proto-loader.
import * as grpc from '@grpc/grpc-js';
import { fromBinary, toBinary, type DescMessage, type MessageShape } from '@bufbuild/protobuf';
import type { GenService, GenServiceMethods } from '@bufbuild/protobuf/codegenv2';

type In<M extends GenServiceMethods[string]> = MessageShape<M['input']>;
type Out<M extends GenServiceMethods[string]> = MessageShape<M['output']>;

/** grpc-js MethodDefinitions keyed by the methods' local (camelCase) names. */
export type GrpcServiceDefinition<S extends GenServiceMethods> = {
  [K in keyof S]: grpc.MethodDefinition<In<S[K]>, Out<S[K]>>;
};

/** Handlers a server supplies for a service, one per method, typed by method kind. */
export type GrpcServiceImplementation<S extends GenServiceMethods> = {
  [K in keyof S]: S[K]['methodKind'] extends 'unary'
    ? grpc.handleUnaryCall<In<S[K]>, Out<S[K]>>
    : S[K]['methodKind'] extends 'server_streaming'
      ? grpc.handleServerStreamingCall<In<S[K]>, Out<S[K]>>
      : S[K]['methodKind'] extends 'client_streaming'
        ? grpc.handleClientStreamingCall<In<S[K]>, Out<S[K]>>
        : grpc.handleBidiStreamingCall<In<S[K]>, Out<S[K]>>;
};

type UnaryCallback<O> = (error: grpc.ServiceError | null, response?: O) => void;

/** Client stubs, typed by method kind (the argument shapes grpc-js generic clients accept). */
export type GrpcClientMethods<S extends GenServiceMethods> = {
  [K in keyof S]: S[K]['methodKind'] extends 'unary'
    ? (request: In<S[K]>, metadata: grpc.Metadata, options: Partial<grpc.CallOptions>, callback: UnaryCallback<Out<S[K]>>) => grpc.ClientUnaryCall
    : S[K]['methodKind'] extends 'server_streaming'
      ? (request: In<S[K]>, metadata?: grpc.Metadata, options?: Partial<grpc.CallOptions>) => grpc.ClientReadableStream<Out<S[K]>>
      : S[K]['methodKind'] extends 'client_streaming'
        ? (metadata: grpc.Metadata, options: Partial<grpc.CallOptions>, callback: UnaryCallback<Out<S[K]>>) => grpc.ClientWritableStream<In<S[K]>>
        : (metadata?: grpc.Metadata, options?: Partial<grpc.CallOptions>) => grpc.ClientDuplexStream<In<S[K]>, Out<S[K]>>;
};

export type GrpcClient<S extends GenServiceMethods> = grpc.Client & GrpcClientMethods<S>;

export interface GrpcClientConstructor<S extends GenServiceMethods> {
  new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ChannelOptions): GrpcClient<S>;
  service: GrpcServiceDefinition<S>;
}

/** `/package.Service/Method`, the HTTP/2 path gRPC uses for a method. */
export function grpcMethodPath(service: { typeName: string }, method: { name: string }): string {
  return `/${service.typeName}/${method.name}`;
}

function serializer<D extends DescMessage>(schema: D): (value: MessageShape<D>) => Buffer {
  return (value) => {
    // Already-encoded bytes pass through: a server that caches wire bytes writes them as they are.
    const bytes: Uint8Array = value instanceof Uint8Array ? value : toBinary(schema, value);
    // grpc-js frames with Buffer methods, so hand it a Buffer view of the same memory.
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

function deserializer<D extends DescMessage>(schema: D): (bytes: Buffer) => MessageShape<D> {
  return (bytes) => fromBinary(schema, bytes);
}

/**
 * The grpc-js ServiceDefinition of a protobuf-es generated service. Serializers also accept a Uint8Array
 * holding the already-encoded message and send it unchanged.
 */
export function grpcServiceDefinition<S extends GenServiceMethods>(service: GenService<S>): GrpcServiceDefinition<S> {
  const def: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methods) {
    def[method.localName] = {
      path: grpcMethodPath(service, method),
      requestStream: method.methodKind === 'client_streaming' || method.methodKind === 'bidi_streaming',
      responseStream: method.methodKind === 'server_streaming' || method.methodKind === 'bidi_streaming',
      requestSerialize: serializer(method.input) as (v: unknown) => Buffer,
      requestDeserialize: deserializer(method.input),
      responseSerialize: serializer(method.output) as (v: unknown) => Buffer,
      responseDeserialize: deserializer(method.output),
      originalName: method.name,
    };
  }
  return def as GrpcServiceDefinition<S>;
}

/** A grpc-js client class for a protobuf-es generated service. */
export function grpcClientConstructor<S extends GenServiceMethods>(service: GenService<S>): GrpcClientConstructor<S> {
  const def = grpcServiceDefinition(service);
  return grpc.makeGenericClientConstructor(def as unknown as grpc.ServiceDefinition, service.typeName) as unknown as GrpcClientConstructor<S>;
}

/** Adds a generated service with typed handlers to a grpc-js server. Missing handlers answer UNIMPLEMENTED. */
export function addGrpcService<S extends GenServiceMethods>(
  server: grpc.Server,
  service: GenService<S>,
  implementation: Partial<GrpcServiceImplementation<S>>,
): void {
  server.addService(
    grpcServiceDefinition(service) as unknown as grpc.ServiceDefinition,
    implementation as unknown as grpc.UntypedServiceImplementation,
  );
}
