// What tracing's start (setup.ts) and its SDK half (sdk.ts) share: the environment read, the
// handle a start returns, the error for a bad OTEL_* value.

export type Env = Record<string, string | undefined>;

/** What `startTracing` started: `shutdown` flushes the spans still waiting (call it on exit). */
export interface Tracing {
  enabled: boolean;
  /**
   * Where latency histograms take trace-id exemplars from (createMetrics' `exemplars`); undefined
   * when tracing is off, so that the histograms stay as they are without it.
   */
  exemplar?: () => Record<string, string> | undefined;
  shutdown(): Promise<void>;
}

/** A bad OTEL_* value: services refuse to start with it, as with any other bad setting. */
export class TracingConfigError extends Error {
  readonly code = 'invalid_config';
}
