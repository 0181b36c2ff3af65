// API keys in Redis, stored by their SHA-256 only, and the shape of a tenant id.
import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { newId, TasklineError } from '@taskline/engine/core';

/** What a tenant id may look like: it becomes part of Redis keys and hash tags, so no braces or spaces. */
export const TENANT_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

export function assertTenantId(tenant: string): void {
  if (!TENANT_PATTERN.test(tenant)) {
    throw new TasklineError(
      'invalid_request',
      'A tenant id is 1-64 characters of letters, digits, ".", "_" or "-".',
    );
  }
}

/** API keys are looked up by their SHA-256 only; the key itself is shown once and never stored. */
export const hashKey = (key: string) => createHash('sha256').update(key).digest('hex');

/** One hash tag for all keys of the key store: create and revoke write two keys in one MULTI. */
const KEYS = {
  /** id -> JSON metadata (tenant, name, created_at, hash): what `list` shows and `revoke` needs. */
  index: 'tl:{auth}:keys',
  /** hash -> JSON {id, tenant}: the one read per authenticated request. */
  byHash: (hash: string) => `tl:{auth}:key:${hash}`,
} as const;

export interface ApiKeyInfo {
  id: string;
  tenant: string;
  name: string;
  created_at: number;
}

/** Tenant API keys held hashed in Redis, managed by the `keys` CLI and read by every replica. */
export class ApiKeyStore {
  constructor(private readonly redis: Redis) {}

  /** Makes a key for `tenant`; the returned `key` is the only copy of the secret. */
  async create(tenant: string, name = ''): Promise<ApiKeyInfo & { key: string }> {
    assertTenantId(tenant);
    const id = newId('key');
    const key = `tlk_${randomBytes(32).toString('base64url')}`;
    const hash = hashKey(key);
    const info: ApiKeyInfo = { id, tenant, name, created_at: Math.floor(Date.now() / 1000) };
    await this.redis
      .multi()
      .set(KEYS.byHash(hash), JSON.stringify({ id, tenant }))
      .hset(KEYS.index, id, JSON.stringify({ ...info, hash }))
      .exec();
    return { ...info, key };
  }

  async list(tenant?: string): Promise<ApiKeyInfo[]> {
    const all = await this.redis.hgetall(KEYS.index);
    return Object.values(all)
      .map((raw) => JSON.parse(raw) as ApiKeyInfo & { hash?: string })
      .filter((k) => tenant === undefined || k.tenant === tenant)
      .map(({ id, tenant: t, name, created_at }) => ({ id, tenant: t, name, created_at }))
      .sort((a, b) => a.created_at - b.created_at || a.id.localeCompare(b.id));
  }

  /** True when the key existed; a revoked key fails its very next request on every replica. */
  async revoke(id: string): Promise<boolean> {
    const raw = await this.redis.hget(KEYS.index, id);
    if (!raw) return false;
    const { hash } = JSON.parse(raw) as { hash: string };
    await this.redis.multi().del(KEYS.byHash(hash)).hdel(KEYS.index, id).exec();
    return true;
  }

  /** The tenant of a presented key, or null. */
  async lookup(key: string): Promise<{ id: string; tenant: string } | null> {
    const raw = await this.redis.get(KEYS.byHash(hashKey(key)));
    return raw ? (JSON.parse(raw) as { id: string; tenant: string }) : null;
  }
}
