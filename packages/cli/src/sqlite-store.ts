// The CLI's task ids on disk (SQLite), per endpoint and credential, kept as long as the server keeps tasks.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type { TaskIdStore, TaskScope, TrackedTask } from '@taskline/client';
import { DEFAULTS } from '@taskline/config';

interface Row {
  key: string;
  protocol: 'lmsp' | 'mcp';
  endpoint: string;
  /** NULL: written by an older CLI, which did not record whose task it was. */
  credential: string | null;
  task_id: string | null;
  request: string;
  status: string;
  last_event_id: number;
  done: number;
  created_at: number;
  updated_at: number;
}

const COLUMNS =
  'key, protocol, endpoint, credential, task_id, request, status, last_event_id, done, created_at, updated_at';

const CREATE = `CREATE TABLE IF NOT EXISTS tasks (
  key TEXT NOT NULL,
  protocol TEXT NOT NULL,
  endpoint TEXT NOT NULL,
  credential TEXT,
  task_id TEXT,
  request TEXT NOT NULL,
  status TEXT NOT NULL,
  last_event_id INTEGER NOT NULL,
  done INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (endpoint, credential, key)
)`;

/** How long a finished entry is kept: as long as the server keeps a task that ended. */
export const DEFAULT_STATE_RETENTION_S = Number(DEFAULTS.TASKLINE_TASK_RETENTION_S);

export interface SqliteStoreOptions {
  /**
   * Seconds a finished entry is kept after its last update (default
   * `DEFAULT_STATE_RETENTION_S`); pruned when the store is opened. 0: at the next open.
   */
  retentionS?: number;
}

/**
 * The CLI's task ids on disk, each entry in its scope (endpoint and credential id). `synchronous =
 * FULL` in WAL mode: a `put` has reached the disk when it returns, so a CLI killed right after (even
 * by a power loss) still finds the entry.
 *
 * The file holds a prompt only while it may be needed: the create body is kept until the server
 * answered the create (resuming sends it again under its Idempotency-Key), not once the task
 * exists, and a finished entry goes after the retention (by then the server forgot its task too).
 * `secure_delete` zeroes what goes, so no prompt lingers in the file's free pages.
 */
export class SqliteTaskIdStore implements TaskIdStore {
  private readonly db: Database.Database;

  constructor(path: string, options: SqliteStoreOptions = {}) {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.pragma('busy_timeout = 5000');
    this.db.pragma('secure_delete = ON');
    const retentionMs = (options.retentionS ?? DEFAULT_STATE_RETENTION_S) * 1000;
    // IMMEDIATE: two CLIs opening an old file at once migrate it once.
    this.db
      .transaction(() => {
        this.migrate();
        this.prune(Date.now() - retentionMs);
      })
      .immediate();
  }

  /** Drops the finished entries last updated before `before`, and prompts no resume needs. */
  private prune(before: number): void {
    this.db.prepare('DELETE FROM tasks WHERE done = 1 AND updated_at <= ?').run(before);
    // Left by a CLI that kept the prompt after the task existed.
    this.db.exec(`UPDATE tasks SET request = 'null' WHERE task_id IS NOT NULL AND request <> 'null'`);
  }

  /**
   * A file of an older CLI keyed entries by key alone and did not record the credential: its rows
   * are kept with none (NULL), which no scope matches, so no other tenant's key ever follows them
   * (see `unscoped`).
   */
  private migrate(): void {
    const columns = this.db.prepare(`SELECT name FROM pragma_table_info('tasks')`).all() as {
      name: string;
    }[];
    if (columns.length > 0 && !columns.some((c) => c.name === 'credential')) {
      this.db.exec('ALTER TABLE tasks RENAME TO tasks_v1');
      this.db.exec(CREATE);
      this.db.exec(
        `INSERT INTO tasks (${COLUMNS}) SELECT ${COLUMNS.replace('credential', 'NULL')} FROM tasks_v1`,
      );
      this.db.exec('DROP TABLE tasks_v1');
    } else this.db.exec(CREATE);
  }

  put(t: TrackedTask): void {
    this.db
      .prepare(
        `INSERT OR REPLACE INTO tasks (${COLUMNS}) VALUES (@key, @protocol, @endpoint, @credential,
          @task_id, @request, @status, @last_event_id, @done, @created_at, @updated_at)`,
      )
      .run({
        key: t.key,
        protocol: t.protocol,
        endpoint: t.endpoint,
        credential: t.credential,
        task_id: t.taskId,
        // Needed only to send an unanswered create again.
        request: t.taskId === null ? JSON.stringify(t.request ?? null) : 'null',
        status: t.status,
        last_event_id: t.lastEventId,
        done: t.done ? 1 : 0,
        created_at: t.createdAt,
        updated_at: t.updatedAt,
      });
  }

  get(key: string, scope: TaskScope): TrackedTask | null {
    const row = this.db
      .prepare('SELECT * FROM tasks WHERE key = ? AND endpoint = ? AND credential = ?')
      .get(key, scope.endpoint, scope.credential) as Row | undefined;
    return row ? fromRow(row) : null;
  }

  /** The entry of a task id, whichever key it was stored under. */
  byTaskId(taskId: string): TrackedTask | null {
    const row = this.db
      .prepare('SELECT * FROM tasks WHERE task_id = ? AND credential IS NOT NULL')
      .get(taskId) as Row | undefined;
    return row ? fromRow(row) : null;
  }

  unfinished(scope: TaskScope): TrackedTask[] {
    const rows = this.db
      .prepare(
        'SELECT * FROM tasks WHERE done = 0 AND endpoint = ? AND credential = ? ORDER BY created_at, key',
      )
      .all(scope.endpoint, scope.credential) as Row[];
    return rows.map(fromRow);
  }

  /** Unfinished entries of an older CLI at `endpoint`, which recorded no credential. */
  unscoped(endpoint: string): { key: string; taskId: string | null }[] {
    return this.db
      .prepare(
        'SELECT key, task_id AS taskId FROM tasks WHERE done = 0 AND endpoint = ? AND credential IS NULL ORDER BY created_at, key',
      )
      .all(endpoint) as { key: string; taskId: string | null }[];
  }

  /** Gives an unscoped entry to `scope`, once its task proved to be that credential's. */
  claim(key: string, scope: TaskScope): void {
    this.db
      .prepare(
        'UPDATE OR IGNORE tasks SET credential = ? WHERE key = ? AND endpoint = ? AND credential IS NULL',
      )
      .run(scope.credential, key, scope.endpoint);
  }

  /**
   * Moves the entries of `endpoint` stored under credential `from` to `to`: a JWT's entries of an
   * older CLI, keyed by a hash of the token (`tokenHashId`), go to the identity of its claims
   * (`credentialId`), under which a renewed token finds them.
   */
  rekey(endpoint: string, from: string, to: string): void {
    this.db
      .prepare('UPDATE OR IGNORE tasks SET credential = ? WHERE endpoint = ? AND credential = ?')
      .run(to, endpoint, from);
  }

  close(): void {
    this.db.close();
  }
}

function fromRow(r: Row): TrackedTask {
  return {
    key: r.key,
    protocol: r.protocol,
    endpoint: r.endpoint,
    credential: r.credential ?? '',
    taskId: r.task_id,
    request: JSON.parse(r.request) as unknown,
    status: r.status,
    lastEventId: r.last_event_id,
    done: r.done === 1,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}
