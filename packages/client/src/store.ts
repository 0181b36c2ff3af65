// Where a client keeps the ids of the tasks it created, scoped by endpoint and credential.
import { createHash } from 'node:crypto';

/**
 * Whose entries: a store may hold entries of several servers and credentials, and a client reads
 * only those of its own endpoint and credential. Another tenant's task is "not found" to this
 * one, so following (or re-creating) it under the wrong credential would lose or duplicate it.
 */
export interface TaskScope {
  /** Where the task lives (an LMSP base URL or an MCP endpoint). */
  endpoint: string;
  /** `credentialId()` of the bearer token the task was created with: never the token itself. */
  credential: string;
}

/**
 * Stands for a bearer token in a store, never the token itself. A JWT stands for its issuer,
 * subject and tenant claim (`tenantClaim`, by default `tenant` as the server's
 * TASKLINE_JWT_TENANT_CLAIM), which a renewed token keeps: after a rotation the client still finds
 * the entries of the token before. The claims are read, not verified: the server verifies every
 * request, and a task of another tenant is "not found" to it. A JWT without `iss` and `sub`, and
 * any other token (API keys, static keys), stands for a hash of itself (`tokenHashId`).
 */
export function credentialId(apiKey: string | undefined, tenantClaim = 'tenant'): string {
  const claims = jwtClaims(apiKey);
  if (typeof claims?.iss !== 'string' || typeof claims.sub !== 'string') return tokenHashId(apiKey);
  const identity = JSON.stringify([claims.iss, claims.sub, claims[tenantClaim] ?? null]);
  return `jwt:sha256:${createHash('sha256').update(`taskline task store\n${identity}`).digest('hex').slice(0, 32)}`;
}

/**
 * A one-way hash of a bearer token, `''` for none: the store's id of tokens other than JWTs, and
 * of JWTs too in stores written before a JWT stood for its claims.
 */
export function tokenHashId(apiKey: string | undefined): string {
  if (!apiKey) return '';
  return `sha256:${createHash('sha256').update(`taskline task store\n${apiKey}`).digest('hex').slice(0, 32)}`;
}

/** The payload of a compact JWS (RFC 7515 section 7.1), or null for anything else. */
function jwtClaims(token: string | undefined): Record<string, unknown> | null {
  const parts = token?.split('.');
  if (parts?.length !== 3) return null;
  try {
    const claims: unknown = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8'));
    return typeof claims === 'object' && claims !== null ? (claims as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * Where a client keeps the ids of the tasks it created, so that a restarted client resumes
 * waiting on them. The entry is written *before* the create request is sent (with the
 * Idempotency-Key it will use): a crash between send and reply loses nothing, because resuming
 * sends the same request with the same key and gets the same task back.
 */
export interface TrackedTask extends TaskScope {
  /** The client's own id for the entry in its scope: the Idempotency-Key for LMSP, the task id for MCP. */
  key: string;
  protocol: 'lmsp' | 'mcp';
  /** Known once the server answered the create. */
  taskId: string | null;
  /**
   * The create body, so an unanswered create can be sent again; nothing needs it once `taskId` is
   * known, and a store may drop it then (the CLI's does: it holds the prompt).
   */
  request: unknown;
  /** Last status seen (protocol's own words). */
  status: string;
  /** LMSP: last event sequence number handed to the caller, for `Last-Event-ID`. */
  lastEventId: number;
  /** True once a terminal status was seen: nothing left to resume. */
  done: boolean;
  createdAt: number;
  updatedAt: number;
}

export interface TaskIdStore {
  /** Writes the entry of `task.key` in the task's scope. */
  put(task: TrackedTask): Promise<void> | void;
  get(key: string, scope: TaskScope): Promise<TrackedTask | null> | TrackedTask | null;
  /** Every entry of the scope not `done`, oldest first. */
  unfinished(scope: TaskScope): Promise<TrackedTask[]> | TrackedTask[];
}

const scopedKey = (key: string, s: TaskScope) => JSON.stringify([s.endpoint, s.credential, key]);

/** For tests and short-lived scripts: nothing survives the process. */
export class MemoryTaskIdStore implements TaskIdStore {
  private readonly tasks = new Map<string, TrackedTask>();

  put(task: TrackedTask): void {
    this.tasks.set(scopedKey(task.key, task), { ...task });
  }

  get(key: string, scope: TaskScope): TrackedTask | null {
    const t = this.tasks.get(scopedKey(key, scope));
    return t ? { ...t } : null;
  }

  unfinished(scope: TaskScope): TrackedTask[] {
    return [...this.tasks.values()]
      .filter((t) => !t.done && t.endpoint === scope.endpoint && t.credential === scope.credential)
      .sort((a, b) => a.createdAt - b.createdAt)
      .map((t) => ({ ...t }));
  }
}

/** Updates an entry in place (no-op when the store lost it). */
export async function patchTracked(
  store: TaskIdStore,
  key: string,
  scope: TaskScope,
  patch: Partial<TrackedTask>,
  now: number,
): Promise<void> {
  const current = await store.get(key, scope);
  if (current) await store.put({ ...current, ...patch, updatedAt: now });
}
