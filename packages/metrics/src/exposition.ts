// The two text formats `/metrics` serves: Prometheus (the default) and OpenMetrics (with exemplars).
import { Histogram, Registry, type HistogramConfiguration } from 'prom-client';

/** The exemplar labels of an observation made now (the active trace), or none. */
export type ExemplarSource = () => Record<string, string> | undefined;

/**
 * A histogram that, given `exemplar`, keeps an exemplar per bucket (the last observation's trace),
 * shown in the OpenMetrics format only; without it, prom-client's plain histogram, unchanged.
 * prom-client refuses exemplars on a metric whose registry renders Prometheus text by default, so
 * such a histogram joins the registry by hand: the Prometheus format still leaves exemplars out.
 */
export function latencyHistogram<T extends string>(
  config: HistogramConfiguration<T> & { registers: Registry[] },
  exemplar: ExemplarSource | undefined,
): Histogram<T> {
  if (!exemplar) return new Histogram(config);
  const histogram = new Histogram<T>({ ...config, registers: [], enableExemplars: true });
  for (const registry of config.registers) registry.registerMetric(histogram);
  // With exemplars prom-client's observe takes one object; callers keep (labels, value).
  const withExemplar = histogram.observe.bind(histogram) as unknown as (data: {
    labels?: object;
    value: number;
    exemplarLabels: Record<string, string>;
  }) => void;
  histogram.observe = ((labels: object | number, value?: number) =>
    typeof labels === 'number'
      ? withExemplar({ value: labels, exemplarLabels: exemplar() ?? {} })
      : withExemplar({ labels, value: value!, exemplarLabels: exemplar() ?? {} })) as Histogram<T>['observe'];
  return histogram;
}

/**
 * Whether a scrape's `Accept` prefers OpenMetrics: it names `application/openmetrics-text` with a
 * weight above every other type it takes (Prometheus asks so when it stores exemplars). A missing
 * header, `*\/*` or a tie gets the Prometheus format.
 */
export function wantsOpenMetrics(accept: string | undefined): boolean {
  if (!accept) return false;
  let openMetrics = 0;
  let other = 0;
  for (const part of accept.split(',')) {
    const [type = '', ...params] = part.split(';').map((p) => p.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    const weight = q ? Number(q.slice(2)) : 1;
    if (!Number.isFinite(weight)) continue;
    if (type === 'application/openmetrics-text') openMetrics = Math.max(openMetrics, weight);
    else other = Math.max(other, weight);
  }
  return openMetrics > 0 && openMetrics > other;
}

/** prom-client's renderer of one metric (untyped: its `.d.ts` leaves it out). */
interface MetricRenderer {
  getMetricsAsString(metric: unknown): Promise<string>;
}

/**
 * The registry in the OpenMetrics text format, exemplars included. prom-client's own OpenMetrics
 * output renames counters in place (drops `_total` from their names), which would change the
 * Prometheus format served next; here each metric is rendered by the registry's own code (its
 * default labels, its escaping) under the OpenMetrics content type, a counter under a renamed copy.
 */
export async function openMetricsText(registry: Registry): Promise<string> {
  const view = Object.create(registry, {
    contentType: { value: Registry.OPENMETRICS_CONTENT_TYPE },
  }) as MetricRenderer;
  const rendered = registry.getMetricsAsArray().map((metric) => {
    if (String(metric.type) !== 'counter') return view.getMetricsAsString(metric);
    const counter = metric as unknown as { get(): Promise<{ name: string }> };
    // OpenMetrics names a counter's family without `_total`, and its sample with it.
    const renamed = {
      get: async () => ({ ...(await counter.get()), name: metric.name.replace(/_total$/, '') }),
    };
    return view.getMetricsAsString(renamed);
  });
  return `${(await Promise.all(rendered)).join('\n')}\n# EOF\n`;
}
