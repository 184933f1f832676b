// The discovery daemon's listener flags with every listener on an ephemeral loopback port, so a test or a bench
// can run several daemons side by side (shared by test/helpers/daemon.ts and the scripts that start a daemon).

const LISTENERS = ['grpcAddr', 'httpAddr', 'monitoringAddr', 'httpsAddr', 'secureGRPCAddr'];

/** `--<listener> 127.0.0.1:0` for every listener but those `pinned` (the caller gives them), then `--ctrlz_port 0`. */
export function ephemeralListeners(...pinned) {
  return [...LISTENERS.filter((f) => !pinned.includes(f)).flatMap((f) => [`--${f}`, '127.0.0.1:0']), '--ctrlz_port', '0'];
}
