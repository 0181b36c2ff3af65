/**
 * The webhook key layout: each tenant's keys share its `{<tenant>}` tag, so a tenant's endpoint
 * writes are one slot; the tenant list is one key. BullMQ queues are one per endpoint.
 */
export const hookKeys = {
  /** Tenants with at least one endpoint (set): what the relay and the delivery workers visit. */
  tenants: 'tl:hooks:tenants',
  /** A tenant's endpoints (hash endpoint id -> JSON record, secrets included). */
  endpoints: (tenant: string) => `tl:hooks:{${tenant}}:endpoints`,
  /** Held by the one relay passing over a tenant's tasks (string, expiring). */
  relayLock: (tenant: string) => `tl:hooks:{${tenant}}:relay`,
  /** A tenant's tasks whose outboxes the relay reads (zset id -> created ms), until they end. */
  open: (tenant: string) => `tl:hooks:{${tenant}}:open`,
  /** The last message queued per endpoint and task (hash `<endpoint>/<task>` -> message id): order. */
  last: (tenant: string) => `tl:hooks:{${tenant}}:last`,
  /** An endpoint's messages by time (zset message id -> ms): redelivery of a time range. */
  messages: (tenant: string, endpoint: string) => `tl:hooks:{${tenant}}:msgs:${endpoint}`,
  /** One message's body and event type (hash), kept for redelivery. */
  message: (tenant: string, endpoint: string, msg: string) => `tl:hooks:{${tenant}}:msg:${endpoint}:${msg}`,
  /** An endpoint's newest attempts (list of JSON, newest first): the console's delivery log. */
  attempts: (tenant: string, endpoint: string) => `tl:hooks:{${tenant}}:attempts:${endpoint}`,
  /** Endpoints disabled for failing whose tenant the relay has still to tell (hash endpoint -> JSON notice). */
  notices: (tenant: string) => `tl:hooks:{${tenant}}:notices`,
  /** Failed attempts in a row per endpoint (hash endpoint -> count): what disables one. */
  failures: (tenant: string) => `tl:hooks:{${tenant}}:failures`,
} as const;

/** An endpoint's BullMQ queue name (ids are `ep_` + base32: nothing to encode). */
export const endpointQueue = (endpoint: string) => `tl-hook-${endpoint}`;

/** Its key prefix, hash-tagged by the queue so BullMQ's scripts run on Redis Cluster. */
export const endpointQueuePrefix = (endpoint: string) => `bull:{${endpointQueue(endpoint)}}`;
