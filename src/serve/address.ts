// Listen addresses in Go's syntax, as users write them for Istio's flags: `:15010` (all interfaces),
// `127.0.0.1:0` (ephemeral port), `[::1]:8080`, `localhost:9876`. Errors read like Go's net package.

import { splitHostPort } from '../lib/hostport';

export class AddressError extends Error {}

export interface ListenAddress {
  /** Host part; empty means every interface. */
  host: string;
  port: number;
}

/**
 * Parses `host:port` as Go's net.Listen("tcp", …) does: an empty port (`127.0.0.1:`) or an empty address
 * means an automatically chosen port.
 */
export function parseListenAddress(text: string): ListenAddress {
  if (text === '') return { host: '', port: 0 };
  let host: string;
  let portText: string;
  try {
    ({ host, port: portText } = splitHostPort(text));
  } catch (e) {
    throw new AddressError((e as Error).message);
  }
  if (portText === '') return { host, port: 0 };
  if (!/^\d+$/.test(portText)) {
    // Go would look a service name up in /etc/services; a daemon flag with a named port is a typo here.
    throw new AddressError(`lookup tcp/${portText}: unknown port`);
  }
  const port = Number(portText);
  if (port > 65535) throw new AddressError(`address ${portText}: invalid port`);
  return { host, port };
}

/** True for loopback peers (127.0.0.0/8, ::1, and IPv4-mapped loopback). */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const a = address.startsWith('::ffff:') ? address.slice(7) : address;
  return a === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(a);
}
