/**
 * The live tool registry: which tool workers are up and what they serve, in Redis under the key
 * family `tl:{tools}:*` (one hash slot). Workers announce themselves with a TTL that Redis
 * expires, so a dead worker vanishes on Redis's clock; each tool's last announcement is also kept
 * as its deployment for a long retention, so a pool scaled to zero stays listed and callable.
 * Api replicas read both through a short cache and merge them with the built-in tools per tenant.
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
/** The names of deployed tools (entries whose key expired are dropped on read). */
const DEPLOYED_KEY = 'tl:{tools}:deployed';
/** One tool's deployment (JSON), expiring a retention after the last worker serving it announced it. */
const deployedKey = (name: string) => `tl:{tools}:deployed:${name}`;

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
  /** Tools it served but no longer offers (an upstream withdrew them): their deployments end now. */
  withdrawn?: string[];
}

/**
 * A tool's deployment: its last announcement, with the announcing worker's tenants. Listed while
 * no live worker serves the tool (a pool at zero replicas), so calls queue on `tool:<name>`.
 */
interface DeployedToolEntry {
  tenants: LiveWorkerEntry['tenants'];
  startedAt: number;
  tool: LiveToolEntry;
}

/** What the registry holds at one read: the live workers and the deployed tools. */
interface RegistrySnapshot {
  workers: LiveWorkerEntry[];
  deployed: DeployedToolEntry[];
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

const visibleTo = ({ tenants }: { tenants: LiveWorkerEntry['tenants'] }, tenant: string) =>
  tenants === '*' || tenants.includes(tenant);

/** `ids` whose `values` are present, parsed; the ids whose keys expired are taken out of `set`. */
async function present<T>(redis: Redis, set: string, ids: string[], values: (string | null)[]): Promise<T[]> {
  const gone = ids.filter((_, i) => values[i] === null);
  if (gone.length > 0) await redis.srem(set, ...gone);
  return values.filter((v): v is string => v !== null).map((v) => JSON.parse(v) as T);
}

export class LiveTools {
  private cached: { at: number; snapshot: Promise<RegistrySnapshot> } | null = null;
  /** Converted definitions by entry JSON: the same announcement is not converted on every request. */
  private readonly definitions = new Map<string, ToolDefinition>();

  constructor(
    private readonly redis: Redis,
    private readonly options: LiveToolsOptions,
  ) {}

  /**
   * Announces (or refreshes) a worker; Redis expires it `ttlMs` after the last call. With
   * `retainMs` (TASKLINE_TOOL_DEPLOYED_RETENTION_MS) each of its tools is also kept as deployed for
   * that long after this call; 0 keeps no deployment, so a tool leaves with its last worker.
   */
  async announce(entry: LiveWorkerEntry, ttlMs: number, retainMs = 0): Promise<void> {
    const tx = this.redis
      .multi()
      .set(workerKey(entry.worker), JSON.stringify(entry), 'PX', ttlMs)
      .sadd(WORKERS_KEY, entry.worker);
    for (const tool of retainMs > 0 ? entry.tools : []) {
      const deployed: DeployedToolEntry = { tenants: entry.tenants, startedAt: entry.startedAt, tool };
      tx.set(deployedKey(tool.name), JSON.stringify(deployed), 'PX', retainMs).sadd(DEPLOYED_KEY, tool.name);
    }
    for (const name of entry.withdrawn ?? []) tx.del(deployedKey(name)).srem(DEPLOYED_KEY, name);
    await tx.exec();
  }

  /** Removes a worker's announcement at once (a drained worker), instead of waiting for its TTL. */
  async withdraw(worker: string): Promise<void> {
    await this.redis.multi().del(workerKey(worker)).srem(WORKERS_KEY, worker).exec();
  }

  /** Every live worker's announcement, through the cache. */
  async workers(): Promise<LiveWorkerEntry[]> {
    return (await this.snapshot()).workers;
  }

  private snapshot(): Promise<RegistrySnapshot> {
    const now = Date.now();
    if (this.cached && now - this.cached.at < this.options.cacheMs) return this.cached.snapshot;
    const snapshot = this.read();
    this.cached = { at: now, snapshot };
    // A failed read is not cached: the next request tries again.
    snapshot.catch(() => {
      if (this.cached?.snapshot === snapshot) this.cached = null;
    });
    return snapshot;
  }

  private async read(): Promise<RegistrySnapshot> {
    const [workerIds, names] = await Promise.all([
      this.redis.smembers(WORKERS_KEY),
      this.redis.smembers(DEPLOYED_KEY),
    ]);
    const [workerValues, deployedValues] = await Promise.all([
      workerIds.length > 0 ? this.redis.mget(...workerIds.map(workerKey)) : [],
      names.length > 0 ? this.redis.mget(...names.map(deployedKey)) : [],
    ]);
    return {
      workers: await present<LiveWorkerEntry>(this.redis, WORKERS_KEY, workerIds, workerValues),
      deployed: await present<DeployedToolEntry>(this.redis, DEPLOYED_KEY, names, deployedValues),
    };
  }

  /**
   * The tools served to `tenant`, one entry per name: the version of the live worker that started
   * last (during a rolling deploy, the new one), with the slots of every worker serving it; then
   * each deployed tool that no live worker serves at all, with 0 slots (its pool is at zero).
   */
  async visible(tenant: string): Promise<LiveToolEntry[]> {
    const { workers, deployed } = await this.snapshot();
    const newest = new Map<string, { entry: LiveToolEntry; startedAt: number; slots: number }>();
    for (const worker of workers) {
      if (!visibleTo(worker, tenant)) continue;
      for (const entry of worker.tools) {
        const seen = newest.get(entry.name);
        const slots = (seen?.slots ?? 0) + entry.slots;
        if (!seen || worker.startedAt > seen.startedAt)
          newest.set(entry.name, { entry, startedAt: worker.startedAt, slots });
        else seen.slots = slots;
      }
    }
    const listed = [...newest.values()].map(({ entry, slots }) => ({ ...entry, slots }));
    // A name a live worker serves to anyone is never listed from its deployment: the live
    // workers' tenants decide who reaches it, and an older deployment cannot widen them.
    const served = new Set(workers.flatMap((w) => w.tools.map((t) => t.name)));
    for (const { tenants, tool } of deployed)
      if (!served.has(tool.name) && visibleTo({ tenants }, tenant)) listed.push({ ...tool, slots: 0 });
    return listed;
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
