// Normalises a control-plane `host:port` for gRPC (IPv6 hosts bracketed).
import { isIPv6 } from 'node:net';

/**
 * `host:port` as gRPC reads it: an IPv6 host bracketed (RFC 3986 section 3.2.2). Kubernetes joins
 * `$(POD_IP):port` with no brackets, and nothing there can add them only for IPv6; unbracketed,
 * gRPC takes all of `fd00::5:7070` for the host. So the last `:port` is the port.
 */
export function normaliseControlAddress(address: string): string {
  const colon = address.lastIndexOf(':');
  const host = address.slice(0, colon);
  return colon > 0 && isIPv6(host) ? `[${host}]${address.slice(colon)}` : address;
}
