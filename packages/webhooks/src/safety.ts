/**
 * What a delivery may reach (docs/webhooks.md, "Safety"): https only unless http is allowed;
 * private, loopback, link-local and other non-public addresses refused unless allowed, judged on
 * the address the socket connects to (a lookup that checks what it resolved), so a name that
 * resolves differently later (DNS rebinding) cannot slip past a check made earlier.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/** A resolver with `dns.lookup`'s shape (`all: true`): the system's, or a test's. */
export type Resolve = (
  hostname: string,
  options: { all: true; family?: number },
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

export interface Reach {
  /** TASKLINE_WEBHOOK_ALLOW_HTTP: plain http endpoints (tests, a private network). */
  allowHttp: boolean;
  /** TASKLINE_WEBHOOK_ALLOW_PRIVATE: endpoints on private, loopback or link-local addresses. */
  allowPrivate: boolean;
  /** Name resolution; the system's (`dns.lookup`) unless given. */
  resolve?: Resolve;
}

/** A URL or address a delivery may not reach; `code` is the problem's stable code. */
export class UnsafeTarget extends Error {
  constructor(
    readonly code: 'webhook_url_invalid' | 'webhook_address_refused',
    message: string,
  ) {
    super(message);
  }
}

const BLOCKED = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 3],
] as const)
  BLOCKED.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 127],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const)
  BLOCKED.addSubnet(net, prefix, 'ipv6');

/** True for an address no public endpoint has (IPv4-mapped IPv6 judged as its IPv4). */
export function isNonPublic(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return BLOCKED.check(mapped[1]!, 'ipv4');
  const family = isIP(address);
  if (family === 0) return true;
  return BLOCKED.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/** The endpoint URL, checked for what can be judged without connecting; throws UnsafeTarget. */
export function checkUrl(raw: string, reach: Reach): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UnsafeTarget('webhook_url_invalid', 'url is not an absolute URL');
  }
  if (url.protocol !== 'https:' && !(reach.allowHttp && url.protocol === 'http:'))
    throw new UnsafeTarget('webhook_url_invalid', 'url must use https');
  if (url.username || url.password)
    throw new UnsafeTarget('webhook_url_invalid', 'url must not carry credentials');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (
    !reach.allowPrivate &&
    (isIP(host) ? isNonPublic(host) : host === 'localhost' || host.endsWith('.localhost'))
  )
    throw new UnsafeTarget('webhook_address_refused', `url names a non-public address (${host})`);
  return url;
}

/**
 * A `lookup` for the socket: resolves, then refuses a non-public address unless allowed. Node
 * connects to exactly what this returns, so the address checked is the address connected to.
 */
export function guardedLookup(reach: Reach): LookupFunction {
  return (hostname, options, callback) => {
    const resolve: Resolve = reach.resolve ?? dnsLookup;
    resolve(hostname, { all: true, family: options.family as number | undefined }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const refused = reach.allowPrivate ? undefined : addresses.find((a) => isNonPublic(a.address));
      if (refused)
        return callback(
          new UnsafeTarget('webhook_address_refused', `${hostname} resolves to a non-public address`),
          '',
          0,
        );
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      const first = addresses[0]!;
      callback(null, first.address, first.family);
    });
  };
}
