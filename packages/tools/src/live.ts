/**
 * The live tool registry: which tool workers are up and what they serve, in Redis under the key
 * family `tl:{tools}:*` (one hash slot). Workers announce themselves with a TTL that Redis
 * expires, so a dead worker's tools vanish on Redis's clock; api replicas read it through a short
 * cache and merge it with the built-in tools per tenant.
 */
import { z } from 'zod';
import type { TaskStore } from '@taskline/engine';
import type { OnRestart, TaskSupport, ToolDefinition } from '@taskline/tool-sdk';
import { toolQueue, ToolRegistry } from './api.js';

type Redis = TaskStore['redis'];

/** The ids of announced workers (entries whose key expired are dropped on read). */
const WORKERS_KEY = 'tl:{tools}:workers';
/** One worker's announcement (JSON), expiring with its heartbeat. */
const workerKey = (id: string) => `tl:{tools}:worker:${id}`;

/** One tool as a worker serves it: what `tools/list` shows, and where its tasks go. */
export interface LiveToolEntry {
  name: string;
  title?: string;
  description: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  taskSupport: TaskSupport;
  onRestart: OnRestart;
  /** The tool's schema version: a hash of its schemas and settings unless the deployment names one. */
  version: string;
  /** Tasks of this tool the worker runs at once. */
  slots: number;
}

/** A tool worker's announcement. */
export interface LiveWorkerEntry {
  worker: string;
  /** `*`: every tenant; otherwise the only tenants that see and reach its tools. */
  tenants: '*' | string[];
  /** When the worker started (its clock): the newest start's version of a tool is the one listed. */
  startedAt: number;
  /** When it last announced itself (its clock): shown to operators. */
  heartbeatAt: number;
  tools: LiveToolEntry[];
}

export interface LiveToolsOptions {
  /** How long an api replica reuses what it read (TASKLINE_TOOL_LIST_CACHE_MS); 0 reads every time. */
  cacheMs: number;
}

/** A served tool as the api holds it: its JSON schemas made a zod schema again for validation. */
function definitionOf(entry: LiveToolEntry): ToolDefinition {
  return {
    name: entry.name,
    ...(entry.title !== undefined && { title: entry.title }),
    description: entry.description,
    inputSchema: z.fromJSONSchema(entry.inputSchema as never) as z.ZodObject,
    ...(entry.outputSchema && { outputSchema: z.fromJSONSchema(entry.outputSchema as never) as z.ZodObject }),
    taskSupport: entry.taskSupport,
    onRestart: entry.onRestart,
    // Never called on the api: a tool worker runs it (validateTool refuses inline tools there).
    run: () => Promise.reject(new Error(`tool ${entry.name} runs on a tool worker`)),
  };
}

const visibleTo = (worker: LiveWorkerEntry, tenant: string) =>
  worker.tenants === '*' || worker.tenants.includes(tenant);

export class LiveTools {
  private cached: { at: number; workers: Promise<LiveWorkerEntry[]> } | null = null;
  /** Converted definitions by entry JSON: the same announcement is not converted on every request. */
  private readonly definitions = new Map<string, ToolDefinition>();

  constructor(
    private readonly redis: Redis,
    private readonly options: LiveToolsOptions,
  ) {}

  /** Announces (or refreshes) a worker; Redis expires it `ttlMs` after the last call. */
  async announce(entry: LiveWorkerEntry, ttlMs: number): Promise<void> {
    await this.redis
      .multi()
      .set(workerKey(entry.worker), JSON.stringify(entry), 'PX', ttlMs)
      .sadd(WORKERS_KEY, entry.worker)
      .exec();
  }

  /** Removes a worker's announcement at once (a drained worker), instead of waiting for its TTL. */
  async withdraw(worker: string): Promise<void> {
    await this.redis.multi().del(workerKey(worker)).srem(WORKERS_KEY, worker).exec();
  }

  /** Every live worker's announcement, through the cache. */
  workers(): Promise<LiveWorkerEntry[]> {
    const now = Date.now();
    if (this.cached && now - this.cached.at < this.options.cacheMs) return this.cached.workers;
    const workers = this.read();
    this.cached = { at: now, workers };
    // A failed read is not cached: the next request tries again.
    workers.catch(() => {
      if (this.cached?.workers === workers) this.cached = null;
    });
    return workers;
  }

  private async read(): Promise<LiveWorkerEntry[]> {
    const ids = await this.redis.smembers(WORKERS_KEY);
    if (ids.length === 0) return [];
    const values = await this.redis.mget(...ids.map(workerKey));
    const gone = ids.filter((_, i) => values[i] === null);
    if (gone.length > 0) await this.redis.srem(WORKERS_KEY, ...gone);
    return values.filter((v): v is string => v !== null).map((v) => JSON.parse(v) as LiveWorkerEntry);
  }

  /**
   * The tools live workers serve to `tenant`, one entry per name: the version of the worker that
   * started last (during a rolling deploy, the new one), with the slots of every worker serving it.
   */
  async visible(tenant: string): Promise<LiveToolEntry[]> {
    const newest = new Map<string, { entry: LiveToolEntry; startedAt: number; slots: number }>();
    for (const worker of await this.workers()) {
      if (!visibleTo(worker, tenant)) continue;
      for (const entry of worker.tools) {
        const seen = newest.get(entry.name);
        const slots = (seen?.slots ?? 0) + entry.slots;
        if (!seen || worker.startedAt > seen.startedAt)
          newest.set(entry.name, { entry, startedAt: worker.startedAt, slots });
        else seen.slots = slots;
      }
    }
    return [...newest.values()].map(({ entry, slots }) => ({ ...entry, slots }));
  }

  /** `base` (the built-in tools) plus the live tools `tenant` may see; a built-in name wins. */
  async registryFor(tenant: string, base: ToolRegistry): Promise<ToolRegistry> {
    const live = await this.visible(tenant);
    if (live.length === 0) return base;
    const registry = new ToolRegistry();
    for (const entry of live) {
      const key = JSON.stringify({ ...entry, slots: 0 });
      let definition = this.definitions.get(key);
      if (!definition) {
        definition = definitionOf(entry);
        this.definitions.set(key, definition);
      }
      registry.register(definition, {
        queue: toolQueue(entry.name),
        onRestart: entry.onRestart,
        version: entry.version,
      });
    }
    return base.with(registry);
  }
}
