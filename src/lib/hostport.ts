// Go's net.SplitHostPort and net.JoinHostPort (go/src/net/ipsock.go), with Go's error texts, for the
// host:port strings Istio's flags and fields take (`:15010`, `[::1]:15010`, `istiod.istio-system.svc:15012`).
// Like Go, the port is returned as text (a service name or empty is not an error here); callers that need a
// number check it themselves, as Go's callers do.

/** Go's *net.AddrError: `address <addr>: <err>` (just `<err>` for an empty address). */
export class HostPortError extends Error {
  constructor(
    readonly addr: string,
    readonly err: string,
  ) {
    super(addr === '' ? err : `address ${addr}: ${err}`);
    this.name = 'HostPortError';
  }
}

/** Splits `host:port`, `[host]:port` or `[host%zone]:port`; the host loses its brackets. Throws HostPortError. */
export function splitHostPort(hostport: string): { host: string; port: string } {
  const missingPort = 'missing port in address';
  const tooManyColons = 'too many colons in address';
  let j = 0;
  let k = 0;
  let host: string;
  const i = hostport.lastIndexOf(':');
  if (i < 0) throw new HostPortError(hostport, missingPort);
  if (hostport[0] === '[') {
    const end = hostport.indexOf(']');
    if (end < 0) throw new HostPortError(hostport, "missing ']' in address");
    if (end + 1 === hostport.length) throw new HostPortError(hostport, missingPort);
    if (end + 1 !== i) throw new HostPortError(hostport, hostport[end + 1] === ':' ? tooManyColons : missingPort);
    host = hostport.slice(1, end);
    j = 1;
    k = end + 1;
  } else {
    host = hostport.slice(0, i);
    if (host.includes(':')) throw new HostPortError(hostport, tooManyColons);
  }
  if (hostport.indexOf('[', j) >= 0) throw new HostPortError(hostport, "unexpected '[' in address");
  if (hostport.indexOf(']', k) >= 0) throw new HostPortError(hostport, "unexpected ']' in address");
  return { host, port: hostport.slice(i + 1) };
}

/** `host:port`, bracketing a host with a colon (an IPv6 literal), as Go prints addresses (`[::]:15010`). */
export function joinHostPort(host: string, port: string | number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
