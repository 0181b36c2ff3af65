// Loaded models shared by id within a memory budget, least recently used evicted.
import type { ModelBackend } from './types.js';

export interface ModelCacheOptions<M extends ModelBackend> {
  /** Memory budget for loaded models, in bytes, as counted by estimateBytes. */
  budgetBytes: number;
  load: (id: string) => Promise<M>;
  /** Bytes the model will hold once loaded (for ONNX models: estimateOnnxModelBytes). */
  estimateBytes: (id: string) => number | Promise<number>;
}

export interface ModelLease<M extends ModelBackend> {
  readonly model: M;
  /** Ends this use; the promise settles once any eviction it allowed is done. Idempotent. */
  release(): Promise<void>;
}

interface Entry<M> {
  id: string;
  bytes: number;
  users: number;
  model?: M;
  ready: Promise<M>;
}

/**
 * Loaded models shared by id, kept within a memory budget by evicting the least recently used
 * idle ones. A model in use is never evicted: when everything loaded is in use, a new model is
 * loaded over budget and the excess is evicted as soon as models are released. A model that
 * broke is loaded anew by the next acquire.
 */
export class ModelCache<M extends ModelBackend = ModelBackend> {
  /** Insertion order is recency: every acquire and release moves its entry to the end. */
  private readonly entries = new Map<string, Entry<M>>();

  constructor(private readonly opts: ModelCacheOptions<M>) {}

  async acquire(id: string): Promise<ModelLease<M>> {
    const found = this.entries.get(id);
    // A model that broke (its thread died) fails every request: it is loaded anew. Its leases
    // still held end on the old entry, and disposing a broken model has nothing left to wait for.
    if (found?.model?.broken) {
      this.entries.delete(id);
      void found.model.dispose();
    }
    const entry = this.entries.get(id) ?? this.startLoading(id);
    entry.users += 1;
    this.touch(entry);
    let model: M;
    try {
      model = await entry.ready;
    } catch (error) {
      entry.users -= 1;
      if (this.entries.get(id) === entry) this.entries.delete(id);
      throw error;
    }
    let released = false;
    return {
      model,
      release: async () => {
        if (released) return;
        released = true;
        entry.users -= 1;
        this.touch(entry);
        await this.evict(0);
      },
    };
  }

  /** Whether `id` is loaded now (an acquire would not wait for a load). */
  isLoaded(id: string): boolean {
    const model = this.entries.get(id)?.model;
    return model !== undefined && !model.broken;
  }

  /** Ids of loaded (or loading) models, least recently used first. */
  get ids(): string[] {
    return [...this.entries.keys()];
  }

  get usedBytes(): number {
    let total = 0;
    for (const entry of this.entries.values()) total += entry.bytes;
    return total;
  }

  /** Disposes every idle model; models in use stay until released. */
  async clear(): Promise<void> {
    const idle = [...this.entries.values()].filter((e) => e.users === 0 && e.model);
    for (const entry of idle) this.entries.delete(entry.id);
    await Promise.all(idle.map((e) => e.model!.dispose()));
  }

  private startLoading(id: string): Entry<M> {
    const entry = { id, bytes: 0, users: 0 } as Entry<M>;
    this.entries.set(id, entry);
    entry.ready = (async () => {
      const bytes = await this.opts.estimateBytes(id);
      await this.evict(bytes);
      entry.bytes = bytes;
      entry.model = await this.opts.load(id);
      return entry.model;
    })();
    return entry;
  }

  private touch(entry: Entry<M>): void {
    if (this.entries.get(entry.id) !== entry) return;
    this.entries.delete(entry.id);
    this.entries.set(entry.id, entry);
  }

  /** Disposes idle models, least recently used first, until `incoming` more bytes fit the budget. */
  private async evict(incoming: number): Promise<void> {
    const victims: Entry<M>[] = [];
    let used = this.usedBytes;
    for (const entry of this.entries.values()) {
      if (used + incoming <= this.opts.budgetBytes) break;
      if (entry.users > 0 || !entry.model) continue;
      victims.push(entry);
      used -= entry.bytes;
    }
    for (const entry of victims) this.entries.delete(entry.id);
    await Promise.all(victims.map((e) => e.model!.dispose()));
  }
}
