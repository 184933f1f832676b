import type { ChildProcess } from 'node:child_process';

/** Anything that runs functions at its end: a tap test, or a `Cleanup`. */
export interface Owner {
  teardown(fn: () => unknown): void;
}
export interface ShResult {
  code: number;
  stdout: string;
  stderr: string;
}
export interface Started {
  child: ChildProcess;
  out: () => string;
}
export interface PodMeta {
  name: string;
  namespace: string;
  serviceAccount?: string;
  ip: string;
  labels?: Record<string, string>;
}
export interface Pem {
  cert: string;
  key: string;
}

export const PROXY_UID: number;
export const APP_UID: number;
export const CAPTURE_ARGS: readonly string[];
export const TPROXY_CAPTURE_ARGS: readonly string[];
export const CHILD_ENV: { PATH: string };

export function netnsUnavailable(): string | false;
export function meshPodsUnavailable(o?: { openssl?: boolean }): string | false;
export function sh(args: readonly string[], o?: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }): ShResult;
export function must(args: readonly string[], o?: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }): string;
export class Cleanup implements Owner {
  teardown(fn: () => unknown): void;
  run(): Promise<void>;
}
export function createNetns(owner: Owner, prefix?: string, o?: { resolvConf?: string }): string;
export function netnsExists(ns: string): boolean;
export function linkPod(world: string, pod: string, o: { hostIf: string; hostIp: string; podIp: string; prefixLength?: number }): void;
export function asUser(uid: number, argv: readonly string[]): string[];
export function spawnIn(ns: string, file: string, args: readonly string[], o?: { env?: NodeJS.ProcessEnv; cwd?: string }): ChildProcess;
export function startIn(
  owner: Owner,
  ns: string,
  argv: readonly string[],
  o: {
    ready: RegExp;
    what: string;
    env?: NodeJS.ProcessEnv;
    cwd?: string;
    timeoutMs?: number;
    onOutput?: (chunk: string) => void;
    stopSignal?: NodeJS.Signals;
  },
): Promise<Started>;
export function httpGetIn(ns: string, url: string, headers?: Record<string, string>): { status: number; body: string };
export function capture(ns: string, dist: string, o?: { dns?: boolean; tproxy?: boolean }): ShResult;
export function startDiscovery(
  owner: Owner,
  o: {
    ns: string;
    dist: string;
    configDir: string;
    grpcAddr: string;
    home: string;
    env?: NodeJS.ProcessEnv;
    onOutput?: (chunk: string) => void;
    stopSignal?: NodeJS.Signals;
    /** the mesh config file text, written to `home` and passed as --meshConfig */
    meshConfig?: string;
  },
): Promise<Started>;
export function startSidecar(
  owner: Owner,
  o: {
    ns: string;
    dist: string;
    home: string;
    discoveryAddress: string;
    pod: PodMeta;
    certs?: Pem & { root: string };
    allStats?: boolean;
    env?: NodeJS.ProcessEnv;
    onOutput?: (chunk: string) => void;
    stopSignal?: NodeJS.Signals;
    /** Run as Istio runs a TPROXY sidecar: uid 0, group 1337, INTERCEPTION_MODE=TPROXY. */
    tproxy?: boolean;
    /** A real Envoy the agent runs as its data plane instead of its engine. */
    binaryPath?: string;
    /** `pilot-agent proxy router` (a gateway) instead of `proxy sidecar`. */
    router?: boolean;
  },
): Promise<Started>;
export function waitSidecarReady(ns: string, timeoutMs: number, why: () => string): Promise<void>;
export function startApp(owner: Owner, ns: string, name: string, o?: { httpPort?: number; tcpPort?: number; grpcPort?: number }): Promise<Started>;
export function callIn(ns: string, asApp: boolean, ...args: string[]): Record<string, unknown>;
export function opensslIdentities(dir: string, ids: readonly string[], root?: Pem): { root: string; certs: Record<string, Pem> };

export const meshAddr: { pod(i: number): string; gateway(i: number): string; vip(i: number): string };
export function spiffeOf(name: string): string;
export interface MeshPod {
  name: string;
  /** false: a bare pod (no capture, no sidecar, no tlsMode label) */
  mesh?: boolean;
  /**
   * a gateway pod: `pilot-agent proxy router` with its workload certificate, no capture, no app, not in the
   * registry (a Gateway selects it by its labels)
   */
  gateway?: boolean;
  /** inbound captured in TPROXY mode (Istio's interceptionMode: TPROXY): original_src on its virtualInbound */
  tproxy?: boolean;
  /** labels beside app and tlsMode (the sidecar's node labels) */
  labels?: Record<string, string>;
  /** sidecar environment beside the defaults (what an injector would set: MESH_META_WORKLOAD_NAME…) */
  env?: Record<string, string>;
  /** a real Envoy the pod's agent runs as its data plane (ProxyConfig.binaryPath) instead of its engine */
  binaryPath?: string;
}
export function meshRegistry(pods: readonly MeshPod[]): string;
export interface Mesh {
  world: string;
  ns: Record<string, string>;
  configDir: string;
  identitiesDir: string;
  logs: string;
  discovery: Started;
  sidecars: Record<string, Started>;
  apps: Record<string, Started>;
}
export function startMesh(
  owner: Owner,
  o: {
    dist: string;
    dir: string;
    pods: readonly MeshPod[];
    config?: Record<string, string>;
    /** the daemon's mesh config file text */
    meshConfig?: string;
    prefix?: string;
    stopSignal?: NodeJS.Signals;
    timeoutMs?: number;
    progress?: (what: string) => void;
    /** the argv that replaces `<dist>/pilot-agent` for that pod's sidecar */
    sidecarCommand?: (pod: string) => string[] | undefined;
  },
): Promise<Mesh>;
export function proxyPids(ns: string): number[];
