// The scheduler's side of the control plane: workers' registrations, heartbeats and drain commands.
import * as grpc from '@grpc/grpc-js';
import { normaliseControlAddress } from './address.js';
import type { Heartbeat__Output } from './generated/taskline/control/v1/Heartbeat.js';
import type { Register__Output } from './generated/taskline/control/v1/Register.js';
import type { WorkerMessage__Output } from './generated/taskline/control/v1/WorkerMessage.js';
import { controlService, type ControlStream, type ModelSlots } from './proto.js';
import { serverCredentials, tokenAccepted, type ControlSecurity } from './security.js';

/** How the control server learns whether its replica leads, and where the leader is otherwise. */
export interface LeaderLookup {
  isLeader(): boolean;
  /** The leader's control address, or null when none is known. */
  leaderAddr(): Promise<string | null>;
}

export interface WorkerState {
  workerId: string;
  models: ModelSlots[];
  draining: boolean;
  lastSeen: number;
  /** Leases the worker renewed since it started, as of its last heartbeat. */
  leaseRenewals: number;
}

export interface ControlServerOptions {
  /** `host:port` (an IPv6 host bracketed or not); port 0 picks a free one. */
  address: string;
  leadership: LeaderLookup;
  /** Interval the workers are told to heartbeat at. */
  heartbeatMs: number;
  /** A worker silent this long no longer counts as capacity. */
  workerTimeoutMs: number;
  schedulerId: string;
  /** Who may connect (`controlSecurityFromEnv`). */
  security: ControlSecurity;
  /** A worker reported more free slots than before: a dispatch round can use them now. */
  onCapacity?: () => void;
  /** A worker's slots are gone (its stream ended, or it began to drain): what was lent of them is not there. */
  onCapacityLost?: () => void;
  onEvent?: (event: string, fields: Record<string, unknown>) => void;
}

export interface ControlServer {
  readonly port: number;
  /** Workers connected to this replica with a recent heartbeat. */
  workers(): WorkerState[];
  /** Free slots per model over live workers that are not draining: what may be dispatched now. */
  capacity(): Map<string, number>;
  /** Tells one worker (or every worker) to drain within `deadlineMs`; returns how many were told. */
  drain(workerId: string | null, deadlineMs: number): number;
  close(): Promise<void>;
}

/** A registered worker: its last report, its stream, and the process that holds the id. */
interface Entry {
  state: WorkerState;
  stream: ControlStream;
  instance: string;
}

/** What the handlers below share: the options and this replica's registered workers. */
interface Registry {
  readonly options: ControlServerOptions;
  readonly streams: Map<string, Entry>;
  readonly emit: NonNullable<ControlServerOptions['onEvent']>;
}

/** Serves the `Control` service: registration, heartbeats and drain commands. */
export async function startControlServer(options: ControlServerOptions): Promise<ControlServer> {
  const registry: Registry = { options, streams: new Map(), emit: options.onEvent ?? (() => undefined) };
  const server = new grpc.Server();
  server.addService(controlService().service, {
    Connect: (stream: ControlStream) => connect(registry, stream),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(
      normaliseControlAddress(options.address),
      serverCredentials(options.security),
      (err, p) => (err ? reject(err) : resolve(p)),
    ),
  );
  return {
    port,
    workers: () => live(registry).map((e) => e.state),
    capacity: () => capacity(registry),
    drain: (workerId, deadlineMs) => drain(registry, workerId, deadlineMs),
    close: () => close(registry, server),
  };
}

/** Ends a stream with a gRPC error status, which the worker's client reads as final. */
function refuse(stream: ControlStream, code: grpc.status, details: string) {
  return stream.emit('error', { code, details });
}

/**
 * Another process under the id of a worker whose heartbeat is live would take over its slots
 * and its cancels: refused. The same process reconnecting (same instance) replaces its entry.
 */
function takesOverLiveWorker(registry: Registry, workerId: string, instance: string, stream: ControlStream) {
  const entry = registry.streams.get(workerId);
  if (!entry || entry.stream === stream || entry.instance === instance) return false;
  return entry.state.lastSeen >= Date.now() - registry.options.workerTimeoutMs;
}

/** Points a worker at the leader and ends its stream: a standby never holds workers. */
function redirect(options: ControlServerOptions, stream: ControlStream) {
  return void options.leadership.leaderAddr().then(
    (addr) => {
      stream.write({ body: 'redirect', redirect: { leader_addr: addr ?? '' } });
      stream.end();
    },
    () => stream.end(),
  );
}

/** One worker's stream: authenticated, then redirected or served until it ends. */
function connect(registry: Registry, stream: ControlStream) {
  const { options, streams, emit } = registry;
  let workerId: string | null = null;
  // Before anything else, a redirect included: a standby's answer names the leader.
  if (!tokenAccepted(options.security, stream.metadata)) {
    emit('worker_unauthenticated', { peer: stream.getPeer() });
    return refuse(stream, grpc.status.UNAUTHENTICATED, 'control-plane token missing or not accepted');
  }
  // Capacity lives in one place, the leader.
  if (!options.leadership.isLeader()) return redirect(options, stream);
  stream.on('data', ({ register, heartbeat }: WorkerMessage__Output) => {
    const now = Date.now();
    if (register) workerId = onRegister(registry, stream, register, now) ?? workerId;
    else if (heartbeat && workerId) onHeartbeat(registry, stream, workerId, heartbeat, now);
  });
  const gone = () => {
    if (workerId && streams.get(workerId)?.stream === stream) {
      streams.delete(workerId);
      emit('worker_gone', { worker: workerId });
      options.onCapacityLost?.();
    }
  };
  stream.on('end', () => {
    gone();
    stream.end();
  });
  stream.on('error', gone);
  stream.on('cancelled', gone);
}

/** Registers the worker and welcomes it; returns its id, or null when the id is a live worker's. */
function onRegister(
  registry: Registry,
  stream: ControlStream,
  register: Register__Output,
  now: number,
): string | null {
  const { options, streams, emit } = registry;
  if (takesOverLiveWorker(registry, register.worker_id, register.instance, stream)) {
    emit('worker_id_taken', { worker: register.worker_id, peer: stream.getPeer() });
    refuse(
      stream,
      grpc.status.ALREADY_EXISTS,
      `worker id ${register.worker_id} is registered by a live worker`,
    );
    return null;
  }
  const workerId = register.worker_id;
  streams.get(workerId)?.stream.end();
  streams.set(workerId, {
    state: { workerId, models: register.models, draining: false, lastSeen: now, leaseRenewals: 0 },
    stream,
    instance: register.instance,
  });
  stream.write({
    body: 'welcome',
    welcome: { scheduler_id: options.schedulerId, heartbeat_ms: options.heartbeatMs },
  });
  emit('worker_registered', { worker: workerId, models: register.models });
  options.onCapacity?.();
  return workerId;
}

/** Records a registered worker's heartbeat; a replica that no longer leads redirects it instead. */
function onHeartbeat(
  registry: Registry,
  stream: ControlStream,
  workerId: string,
  heartbeat: Heartbeat__Output,
  now: number,
) {
  const { options, streams, emit } = registry;
  const entry = streams.get(workerId);
  if (entry?.stream !== stream) return;
  // Leadership moved on with this stream open (e.g. Redis stalled past the lease): the new
  // leader would count no capacity, and this replica dispatches no more.
  if (!options.leadership.isLeader()) {
    streams.delete(workerId);
    emit('worker_redirected', { worker: workerId });
    return redirect(options, stream);
  }
  const freed = heartbeat.models.some(
    (m) => m.free > (entry.state.models.find((o) => o.model === m.model)?.free ?? 0),
  );
  const drains = heartbeat.draining && !entry.state.draining;
  entry.state.models = heartbeat.models;
  entry.state.draining = heartbeat.draining;
  entry.state.lastSeen = now;
  entry.state.leaseRenewals = heartbeat.lease_renewals;
  if (freed && !heartbeat.draining) options.onCapacity?.();
  if (drains) options.onCapacityLost?.();
}

/** Workers with a heartbeat within the timeout. */
function live(registry: Registry): Entry[] {
  const cutoff = Date.now() - registry.options.workerTimeoutMs;
  return [...registry.streams.values()].filter((e) => e.state.lastSeen >= cutoff);
}

/** Free slots per model over live workers that are not draining. */
function capacity(registry: Registry): Map<string, number> {
  const free = new Map<string, number>();
  for (const { state } of live(registry)) {
    if (state.draining) continue;
    for (const m of state.models) free.set(m.model, (free.get(m.model) ?? 0) + m.free);
  }
  return free;
}

/** Tells one worker (or every worker) to drain; returns how many were told. */
function drain(registry: Registry, workerId: string | null, deadlineMs: number): number {
  let told = 0;
  for (const entry of registry.streams.values()) {
    if (workerId !== null && entry.state.workerId !== workerId) continue;
    entry.stream.write({ body: 'drain', drain: { deadline_ms: deadlineMs } });
    entry.state.draining = true;
    told++;
  }
  return told;
}

/** Ends every worker's stream and shuts the server down. */
function close(registry: Registry, server: grpc.Server): Promise<void> {
  return new Promise<void>((resolve) => {
    for (const { stream } of registry.streams.values()) stream.end();
    registry.streams.clear();
    server.tryShutdown(() => resolve());
    // Open streams can hold a graceful shutdown forever; cut them after a moment.
    setTimeout(() => server.forceShutdown(), 1000).unref();
  });
}
