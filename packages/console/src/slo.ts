// SLO burn rates read from Prometheus, as its recording rules name them.
/** SLO burn rates as the Prometheus rules record them (deploy/prometheus/slo-rules.yaml). */
export interface BurnRates {
  configured: boolean;
  /**
   * Per SLO, per window and per namespace (the rules keep each release apart): error ratio over
   * the window divided by the error budget (1 - objective).
   */
  slos?: { slo: string; window: string; namespace?: string; burn_rate: number }[];
  error?: string;
}

const WINDOWS = ['5m', '1h', '6h', '3d'];

/** Reads the burn rates from Prometheus' query API; a failure is reported, never thrown. */
export async function burnRates(prometheusUrl: string, timeoutMs = 2000): Promise<BurnRates> {
  if (!prometheusUrl) return { configured: false };
  try {
    const slos = (
      await Promise.all(
        WINDOWS.map(async (window) => {
          // The objective has only `slo`; the ratios also carry `namespace`: many to one.
          const query = `taskline:slo_errors:ratio_rate${window} / on(slo) group_left() (1 - taskline:slo_objective:ratio)`;
          const url = new URL('/api/v1/query', prometheusUrl);
          url.searchParams.set('query', query);
          const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
          if (!res.ok) throw new Error(`Prometheus answered ${res.status}`);
          const body = (await res.json()) as {
            data: { result: { metric: { slo?: string; namespace?: string }; value: [number, string] }[] };
          };
          return body.data.result.map((r) => ({
            slo: r.metric.slo ?? 'unknown',
            window,
            ...(r.metric.namespace ? { namespace: r.metric.namespace } : {}),
            burn_rate: Number(r.value[1]),
          }));
        }),
      )
    ).flat();
    return { configured: true, slos };
  } catch (err) {
    return { configured: true, slos: [], error: `Prometheus unreachable: ${(err as Error).message}` };
  }
}
