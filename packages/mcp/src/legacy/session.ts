// 2025-era sessions (`Mcp-Session-Id`) in Redis, so any replica serves any request.
import { randomBytes } from 'node:crypto';
import type { TaskStore } from '@taskline/engine';

type Redis = TaskStore['redis'];

/** What `initialize` settled, kept for the session's later requests on any replica. */
export interface LegacySession {
  id: string;
  tenant: string;
  protocolVersion: string;
  /** The client's capabilities from `initialize` (2025-era clients declare them once). */
  capabilities: Record<string, unknown>;
  clientInfo: Record<string, unknown>;
}

const key = (id: string) => `tl:mcp:session:${id}`;

/**
 * 2025-era sessions (`Mcp-Session-Id`) in Redis, so that any api replica serves any request of a
 * session without sticky routing. A session lives `ttlS` seconds after its last request. The id
 * is 256 random bits; a session belongs to the tenant that opened it, and another tenant's id
 * reads exactly like an unknown one.
 */
export class LegacySessions {
  constructor(
    private readonly redis: Redis,
    private readonly ttlS: number,
  ) {}

  async open(session: Omit<LegacySession, 'id'>): Promise<LegacySession> {
    const id = randomBytes(32).toString('base64url');
    await this.redis
      .multi()
      .hset(key(id), {
        tenant: session.tenant,
        protocolVersion: session.protocolVersion,
        capabilities: JSON.stringify(session.capabilities),
        clientInfo: JSON.stringify(session.clientInfo),
      })
      .expire(key(id), this.ttlS)
      .exec();
    return { id, ...session };
  }

  /** The tenant's session `id`, its lifetime renewed; null when unknown, expired or another tenant's. */
  async find(id: string, tenant: string): Promise<LegacySession | null> {
    const raw = await this.redis.hgetall(key(id));
    if (raw.tenant !== tenant) return null;
    await this.redis.expire(key(id), this.ttlS);
    return {
      id,
      tenant,
      protocolVersion: raw.protocolVersion!,
      capabilities: JSON.parse(raw.capabilities ?? '{}') as Record<string, unknown>,
      clientInfo: JSON.parse(raw.clientInfo ?? '{}') as Record<string, unknown>,
    };
  }

  /** Ends the session (HTTP DELETE). */
  async close(id: string): Promise<void> {
    await this.redis.del(key(id));
  }
}
