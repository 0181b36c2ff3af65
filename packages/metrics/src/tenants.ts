// Bounded `tenant` labels: the busiest tenants by name, the rest as `other`.
/** The label every tenant outside the current top N is aggregated under. */
export const OTHER_TENANT = 'other';

/**
 * Keeps the `tenant` label bounded: at any moment at most `topN` tenants carry their own
 * label and everyone else is `other`, so a platform with a million tenants still has
 * `topN + 1` series per metric. Activity is counted with the space-saving algorithm in a
 * map of fixed capacity, so memory stays bounded too.
 *
 * Free slots go to the first tenants seen; `rebalance()` then hands slots to the tenants
 * with the most activity since the previous rebalance and reports who lost one, so that
 * their series can be deleted rather than left behind.
 */
export class TenantLabels {
  readonly topN: number;
  private readonly capacity: number;
  private readonly counts = new Map<string, number>();
  private labelled = new Set<string>();

  constructor(topN: number, capacity = Math.max(64, topN * 8)) {
    if (!Number.isInteger(topN) || topN < 0)
      throw new RangeError(`topN must be a non-negative integer, got ${topN}`);
    if (capacity < topN) throw new RangeError('capacity must be at least topN');
    this.topN = topN;
    this.capacity = capacity;
  }

  /** The label to use for `tenant`; `weight` is the activity it adds (0 to look without counting). */
  label(tenant: string, weight = 1): string {
    // A tenant literally called "other" would merge with the aggregate; that is harmless.
    if (tenant === '' || tenant === OTHER_TENANT) return OTHER_TENANT;
    if (weight > 0) this.count(tenant, weight);
    if (this.labelled.has(tenant)) return tenant;
    if (this.labelled.size < this.topN) {
      this.labelled.add(tenant);
      return tenant;
    }
    return OTHER_TENANT;
  }

  /** Tenants that currently carry their own label. */
  current(): string[] {
    return [...this.labelled];
  }

  /**
   * Gives the slots to the `topN` most active tenants, halves every count so old activity
   * fades, and returns the tenants that lost their label.
   */
  rebalance(): string[] {
    const ranked = [...this.counts.entries()]
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
      .slice(0, this.topN)
      .map(([tenant]) => tenant);
    const next = new Set(ranked);
    // Keep quiet incumbents while slots are free: dropping them would only churn series.
    for (const tenant of this.labelled) if (next.size < this.topN) next.add(tenant);
    const demoted = [...this.labelled].filter((t) => !next.has(t));
    this.labelled = next;
    for (const [tenant, n] of this.counts) {
      const half = Math.floor(n / 2);
      if (half === 0) this.counts.delete(tenant);
      else this.counts.set(tenant, half);
    }
    return demoted;
  }

  private count(tenant: string, weight: number): void {
    const seen = this.counts.get(tenant);
    if (seen !== undefined) {
      this.counts.set(tenant, seen + weight);
      return;
    }
    if (this.counts.size < this.capacity) {
      this.counts.set(tenant, weight);
      return;
    }
    // Space-saving: the newcomer inherits the smallest count, which bounds its overestimate.
    let minTenant = '';
    let min = Infinity;
    for (const [t, n] of this.counts) {
      if (n < min) {
        min = n;
        minTenant = t;
      }
    }
    this.counts.delete(minTenant);
    this.counts.set(tenant, min + weight);
  }
}
