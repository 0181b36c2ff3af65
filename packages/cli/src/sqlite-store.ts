import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type { TaskIdStore, TrackedTask } from '@taskline/client';

interface Row {
  key: string;
  protocol: 'lmsp' | 'mcp';
  endpoint: string;
  task_id: string | null;
  request: string;
  status: string;
  last_event_id: number;
  done: number;
  created_at: number;
  updated_at: number;
}

/**
 * The CLI's task ids on disk. `synchronous = FULL` in WAL mode: a `put` has reached the disk when
 * it returns, so a CLI killed right after (even by a power loss) still finds the entry.
 */
export class SqliteTaskIdStore implements TaskIdStore {
  private readonly db: Database.Database;

  constructor(path: string) {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.pragma('busy_timeout = 5000');
    this.db.exec(`CREATE TABLE IF NOT EXISTS tasks (
      key TEXT PRIMARY KEY,
      protocol TEXT NOT NULL,
      endpoint TEXT NOT NULL,
      task_id TEXT,
      request TEXT NOT NULL,
      status TEXT NOT NULL,
      last_event_id INTEGER NOT NULL,
      done INTEGER NOT NULL,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    )`);
  }

  put(t: TrackedTask): void {
    this.db
      .prepare(
        `INSERT OR REPLACE INTO tasks VALUES (@key, @protocol, @endpoint, @task_id, @request, @status,
          @last_event_id, @done, @created_at, @updated_at)`,
      )
      .run({
        key: t.key,
        protocol: t.protocol,
        endpoint: t.endpoint,
        task_id: t.taskId,
        request: JSON.stringify(t.request ?? null),
        status: t.status,
        last_event_id: t.lastEventId,
        done: t.done ? 1 : 0,
        created_at: t.createdAt,
        updated_at: t.updatedAt,
      });
  }

  get(key: string): TrackedTask | null {
    const row = this.db.prepare('SELECT * FROM tasks WHERE key = ?').get(key) as Row | undefined;
    return row ? fromRow(row) : null;
  }

  /** The entry of a task id, whichever key it was stored under. */
  byTaskId(taskId: string): TrackedTask | null {
    const row = this.db.prepare('SELECT * FROM tasks WHERE task_id = ?').get(taskId) as Row | undefined;
    return row ? fromRow(row) : null;
  }

  unfinished(): TrackedTask[] {
    const rows = this.db
      .prepare('SELECT * FROM tasks WHERE done = 0 ORDER BY created_at, key')
      .all() as Row[];
    return rows.map(fromRow);
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
    taskId: r.task_id,
    request: JSON.parse(r.request) as unknown,
    status: r.status,
    lastEventId: r.last_event_id,
    done: r.done === 1,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}
