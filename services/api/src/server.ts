// The api's HTTP server: listen, and shut down letting streams end with a retry hint.
import { createServer, type Server } from 'node:http';
import type { Logger } from '@taskline/log';
import type { TasklineApi } from './app.js';

export interface RunningServer {
  server: Server;
  port: number;
  /**
   * Graceful stop: refuse new connections, end resumable streams with a `retry:` hint (clients
   * reconnect to another replica with Last-Event-ID), let in-flight requests finish, and cut what
   * is left at the deadline.
   */
  shutdown(deadlineMs: number, retryMs: number): Promise<void>;
}

export async function serve(
  api: TasklineApi,
  host: string,
  port: number,
  logger: Logger,
  /** How long an idle connection stays open (TASKLINE_HTTP_KEEPALIVE_MS). */
  keepAliveMs: number,
): Promise<RunningServer> {
  const server = createServer(api.app);
  // Idle connections outlive the balancers' pools in front (Node.js's 5 s would not): see the setting.
  server.keepAliveTimeout = keepAliveMs;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  const bound = typeof address === 'object' && address ? address.port : port;
  logger.info('listening', { host, port: bound });

  let stopping: Promise<void> | null = null;
  return {
    server,
    port: bound,
    shutdown(deadlineMs, retryMs) {
      stopping ??= (async () => {
        logger.info('shutting_down', {
          in_flight: api.inFlight,
          streams: api.streams.size,
          deadline_ms: deadlineMs,
        });
        api.startDraining();
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        api.streams.endResumable(retryMs);
        server.closeIdleConnections();
        // Connections whose last response just finished go idle; close them as they do.
        const sweep = setInterval(() => server.closeIdleConnections(), 50);
        let timer: NodeJS.Timeout | undefined;
        const deadline = new Promise<'deadline'>(
          (resolve) => (timer = setTimeout(resolve, deadlineMs, 'deadline')),
        );
        const outcome = await Promise.race([closed.then(() => 'drained' as const), deadline]);
        clearInterval(sweep);
        clearTimeout(timer);
        if (outcome === 'deadline') {
          logger.warn('shutdown deadline reached; closing remaining connections', {
            in_flight: api.inFlight,
          });
          server.closeAllConnections();
          // Sockets emit 'close' asynchronously; the handlers of cut requests (cancelling responses
          // whose callers are now gone) run then, and `settled` must see their writes.
          for (let i = 0; i < 100 && api.inFlight > 0; i++) await new Promise((r) => setTimeout(r, 10));
          await new Promise((r) => setImmediate(r));
        }
        await api.settled();
        logger.info('stopped', { outcome });
      })();
      return stopping;
    },
  };
}
