import type { Express } from 'express';
import type { Authenticator } from '@taskline/auth';
import type { ConsoleDeps } from '@taskline/console';
import type { EventHub, ModelInfo, TaskStore } from '@taskline/engine';
import type { TenantLimits } from './limits.js';
import type { StreamRegistry } from './sse.js';

/** What `createApp` builds: the Express app and the parts other surfaces (MCP, the console) mount with. */
export interface TasklineApi {
  app: Express;
  store: TaskStore;
  hub: EventHub;
  auth: Authenticator;
  limits: TenantLimits;
  streams: StreamRegistry;
  models: ReadonlyMap<string, ModelInfo>;
  /** Shutdown: readiness fails, responses ask clients to close their connection. */
  startDraining(): void;
  /** Requests being served now (streams included). */
  readonly inFlight: number;
  /** Settles once every cancel that a departed client caused has been written. */
  settled(): Promise<void>;
  /** Serves a task's events as the LMSP events route does; open streams count under `streamsOf`. */
  followTask: ConsoleDeps['followTask'];
}
