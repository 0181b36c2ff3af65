/**
 * A tenant's webhook endpoints: create, list, change, rotate, delete. Secrets are kept for
 * signing and shown once, in the reply that made them; every other view leaves them out.
 */
import type { Redis } from 'ioredis';
import { newId } from '@taskline/engine';
import { hookKeys } from './keys.js';
import { checkUrl, type Reach } from './safety.js';
import { newSecret } from './sign.js';

/** What an endpoint can be told of (docs/webhooks.md, "Events"). */
export const HOOK_EVENTS = ['task.status', 'task.input_required', 'task.ended'] as const;
export type HookEvent = (typeof HOOK_EVENTS)[number];

interface Secret {
  secret: string;
  /** After this (ms) the secret no longer signs: the old one of a rotation. */
  expiresAt: number | null;
}

export interface EndpointRecord {
  id: string;
  tenant: string;
  url: string;
  events: HookEvent[];
  /** Terminal deliveries carry the task's result (false: status and error only). */
  includeResult: boolean;
  enabled: boolean;
  /** Why it was disabled (`failing`: too many failed attempts in a row), null while enabled. */
  disabledReason: string | null;
  /** When it was disabled (ms), null while enabled (absent from records written before the field). */
  disabledAt?: number | null;
  createdAt: number;
  secrets: Secret[];
}

/** An endpoint as shown: no secret. */
export type EndpointView = Omit<EndpointRecord, 'secrets'>;

export interface EndpointInput {
  url: string;
  events?: HookEvent[];
  includeResult?: boolean;
  enabled?: boolean;
}

export class EndpointError extends Error {
  constructor(
    readonly code:
      'webhook_not_found' | 'webhook_invalid' | 'webhook_url_invalid' | 'webhook_address_refused',
    message: string,
  ) {
    super(message);
  }
}

export const MAX_ENDPOINTS_PER_TENANT = 20;

export function viewOf(record: EndpointRecord): EndpointView {
  const { secrets: _secrets, ...view } = record;
  return { ...view, disabledAt: view.disabledAt ?? null };
}

/** What the relay tells a tenant's other endpoints of one disabled for failing (hookKeys.notices). */
export interface DisabledNotice {
  endpoint: EndpointView;
  /** Failed attempts in a row when it was disabled. */
  failures: number;
}

export class EndpointStore {
  constructor(
    private readonly redis: Redis,
    private readonly reach: Reach,
    /** How long the old secret of a rotation keeps signing (TASKLINE_WEBHOOK_ROTATION_OVERLAP_S). */
    private readonly rotationOverlapMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Creates an endpoint; the reply is the one place its secret is shown. */
  async create(tenant: string, input: EndpointInput): Promise<EndpointView & { secret: string }> {
    const existing = await this.redis.hlen(hookKeys.endpoints(tenant));
    if (existing >= MAX_ENDPOINTS_PER_TENANT)
      throw new EndpointError(
        'webhook_invalid',
        `a tenant has at most ${MAX_ENDPOINTS_PER_TENANT} endpoints`,
      );
    const secret = newSecret();
    const record: EndpointRecord = {
      id: newId('ep'),
      tenant,
      url: this.checked(input.url),
      events: checkEvents(input.events ?? ['task.status']),
      includeResult: input.includeResult ?? true,
      enabled: input.enabled ?? true,
      disabledReason: null,
      createdAt: this.now(),
      secrets: [{ secret, expiresAt: null }],
    };
    await this.redis.hset(hookKeys.endpoints(tenant), record.id, JSON.stringify(record));
    await this.redis.sadd(hookKeys.tenants, tenant);
    return { ...viewOf(record), secret };
  }

  async list(tenant: string): Promise<EndpointRecord[]> {
    const all = await this.redis.hvals(hookKeys.endpoints(tenant));
    return all.map((raw) => JSON.parse(raw) as EndpointRecord).sort((a, b) => a.createdAt - b.createdAt);
  }

  async get(tenant: string, id: string): Promise<EndpointRecord> {
    const raw = await this.redis.hget(hookKeys.endpoints(tenant), id);
    if (!raw) throw new EndpointError('webhook_not_found', `no webhook endpoint ${id}`);
    return JSON.parse(raw) as EndpointRecord;
  }

  /** Changes url, events, result inclusion or enabled; enabling clears the failure count. */
  async update(tenant: string, id: string, input: Partial<EndpointInput>): Promise<EndpointView> {
    const record = await this.get(tenant, id);
    if (input.url !== undefined) record.url = this.checked(input.url);
    if (input.events !== undefined) record.events = checkEvents(input.events);
    if (input.includeResult !== undefined) record.includeResult = input.includeResult;
    if (input.enabled !== undefined) {
      record.enabled = input.enabled;
      record.disabledReason = input.enabled ? null : 'tenant';
      record.disabledAt = input.enabled ? null : this.now();
      if (input.enabled) await this.redis.hdel(hookKeys.failures(tenant), id);
    }
    await this.save(record);
    return viewOf(record);
  }

  /** A new secret, shown once; the previous one keeps signing for the overlap, then expires. */
  async rotate(tenant: string, id: string): Promise<EndpointView & { secret: string }> {
    const record = await this.get(tenant, id);
    const now = this.now();
    const secret = newSecret();
    const current = record.secrets.filter((s) => s.expiresAt === null || s.expiresAt > now);
    record.secrets = [
      { secret, expiresAt: null },
      ...current.slice(0, 1).map((s) => ({ ...s, expiresAt: now + this.rotationOverlapMs })),
    ];
    await this.save(record);
    return { ...viewOf(record), secret };
  }

  async delete(tenant: string, id: string): Promise<void> {
    const removed = await this.redis.hdel(hookKeys.endpoints(tenant), id);
    if (removed === 0) throw new EndpointError('webhook_not_found', `no webhook endpoint ${id}`);
    if ((await this.redis.hlen(hookKeys.endpoints(tenant))) === 0)
      await this.redis.srem(hookKeys.tenants, tenant);
  }

  /**
   * Disables an endpoint that keeps failing (the delivery worker) and leaves the relay a notice
   * for the tenant's other endpoints, in one MULTI on the tenant's slot: no disable without its
   * notice. True when this call disabled it (false: gone, or disabled already).
   */
  async disableFailing(tenant: string, id: string, failures: number): Promise<boolean> {
    const record = await this.get(tenant, id).catch(() => null);
    if (!record?.enabled) return false;
    record.enabled = false;
    record.disabledReason = 'failing';
    record.disabledAt = this.now();
    const notice: DisabledNotice = { endpoint: viewOf(record), failures };
    await this.redis
      .multi()
      .hset(hookKeys.endpoints(tenant), id, JSON.stringify(record))
      .hset(hookKeys.notices(tenant), id, JSON.stringify(notice))
      .exec();
    return true;
  }

  /** The secrets that sign now (the new one first). */
  signing(record: EndpointRecord): string[] {
    const now = this.now();
    return record.secrets.filter((s) => s.expiresAt === null || s.expiresAt > now).map((s) => s.secret);
  }

  private async save(record: EndpointRecord): Promise<void> {
    await this.redis.hset(hookKeys.endpoints(record.tenant), record.id, JSON.stringify(record));
  }

  private checked(url: string): string {
    try {
      return checkUrl(url, this.reach).toString();
    } catch (err) {
      const e = err as { code?: EndpointError['code']; message: string };
      throw new EndpointError(e.code ?? 'webhook_url_invalid', e.message);
    }
  }
}

function checkEvents(events: unknown): HookEvent[] {
  if (
    !Array.isArray(events) ||
    events.length === 0 ||
    !events.every((e) => HOOK_EVENTS.includes(e as HookEvent))
  )
    throw new EndpointError(
      'webhook_invalid',
      `events must be a non-empty list of ${HOOK_EVENTS.join(', ')}`,
    );
  return [...new Set(events as HookEvent[])];
}
