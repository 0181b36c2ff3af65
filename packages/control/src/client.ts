// The worker's side of the control plane: register, report slots, take drain commands, follow the leader.
import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import type { SchedulerMessage__Output } from './generated/taskline/control/v1/SchedulerMessage.js';
import { normaliseControlAddress } from './address.js';
import { controlService, type ControlCall, type ModelSlots } from './proto.js';
import { clientCredentials, tokenMetadata, type ControlSecurity } from './security.js';

export interface ControlClientOptions {
  /** Scheduler control addresses (`host:port`, an IPv6 host bracketed or not), tried in order; redirects are followed. */
  addresses: string[];
  workerId: string;
  /** The credential this worker presents (`controlSecurityFromEnv`). */
  security: ControlSecurity;
  /**
   * A scheduler refused this worker for good (no accepted credential, or its id is a live
   * worker's): the client has stopped; the worker should exit with `message`.
   */
  onRefused: (message: string) => void;
  /** The worker's slots per model right now. */
  slots: () => ModelSlots[];
  draining: () => boolean;
  /** Leases renewed since the worker started, reported in every heartbeat. */
  leaseRenewals?: () => number;
  /** The scheduler asked this worker to drain within `deadlineMs`. */
  onDrain: (deadlineMs: number) => void;
  onEvent?: (event: string, fields: Record<string, unknown>) => void;
  /** Pause before trying the next address after a failure. */
  retryMs?: number;
}

/**
 * HTTP/2 pings on the stream to the scheduler: one that hangs with the stream open (a stopped
 * process, a stuck event loop) answers none, and the worker moves on within about four seconds
 * instead of reporting its slots to a replica that no longer leads. grpc-js servers take pings
 * at any rate.
 */
const KEEPALIVE = { 'grpc.keepalive_time_ms': 2000, 'grpc.keepalive_timeout_ms': 2000 };
/** Answers no other scheduler would change: the worker stops instead of trying the next address. */
const FINAL: ReadonlySet<grpc.status> = new Set([grpc.status.UNAUTHENTICATED, grpc.status.ALREADY_EXISTS]);

/**
 * A scheduler that has not welcomed (or redirected) a worker this long after it connected is
 * skipped: a hung process still accepts TCP connections, and nothing else would time them out.
 */
const WELCOME_TIMEOUT_MS = 4000;

export interface ControlClient {
  /** Address of the scheduler this worker is registered with, or null while looking for one. */
  readonly connectedTo: string | null;
  /** Sends a heartbeat now (e.g. a slot just freed up), if connected. */
  report(): void;
  close(): void;
}

/** One client's connection state, shared by the steps below. */
interface ClientState {
  readonly options: ControlClientOptions;
  readonly Control: ReturnType<typeof controlService>;
  readonly emit: NonNullable<ControlClientOptions['onEvent']>;
  readonly credentials: grpc.ChannelCredentials;
  readonly channelOptions: grpc.ChannelOptions;
  /** This process's registrations, told apart from another process's under the same id. */
  readonly instance: string;
  readonly retryMs: number;
  readonly addresses: string[];
  closed: boolean;
  index: number;
  redirect: string | null;
  /** The address whose stream broke last: the next attempt goes elsewhere when it can. */
  failed: string | null;
  call: ControlCall | null;
  client: grpc.Client | null;
  connectedTo: string | null;
  timer: NodeJS.Timeout | undefined;
  retry: NodeJS.Timeout | undefined;
}

/**
 * Keeps a worker registered with the scheduler leader: connects to the first address that
 * accepts, follows a standby's redirect, heartbeats at the interval the leader asks for, and
 * moves on to the next address whenever the stream breaks (e.g. the leader died).
 */
export function connectControl(options: ControlClientOptions): ControlClient {
  const { credentials, options: channelOptions } = clientCredentials(options.security);
  const state: ClientState = {
    options,
    Control: controlService(),
    emit: options.onEvent ?? (() => undefined),
    credentials,
    channelOptions,
    instance: randomUUID(),
    retryMs: options.retryMs ?? 250,
    addresses: options.addresses.map(normaliseControlAddress),
    closed: false,
    index: 0,
    redirect: null,
    failed: null,
    call: null,
    client: null,
    connectedTo: null,
    timer: undefined,
    retry: undefined,
  };
  attempt(state);
  return {
    get connectedTo() {
      return state.connectedTo;
    },
    report: () => heartbeat(state),
    close: () => stop(state),
  };
}

/** Reports this worker's slots on the open stream, if there is one. */
function heartbeat(state: ClientState) {
  return state.call?.write({
    body: 'heartbeat',
    heartbeat: {
      models: state.options.slots(),
      draining: state.options.draining(),
      lease_renewals: state.options.leaseRenewals?.() ?? 0,
    },
  });
}

/** Drops the current stream and, unless closed, tries again after `delay`. */
function next(state: ClientState, delay: number) {
  clearInterval(state.timer);
  state.connectedTo = null;
  state.call = null;
  state.client?.close();
  state.client = null;
  if (state.closed) return;
  state.retry = setTimeout(() => attempt(state), delay);
}

/** A redirect's target, else the next address in turn, skipping the one that broke last. */
function nextAddress(state: ClientState): string {
  const { addresses } = state;
  if (!state.redirect && addresses.length > 1 && addresses[state.index % addresses.length] === state.failed)
    state.index++;
  const address = state.redirect ?? addresses[state.index % addresses.length]!;
  if (!state.redirect) state.index++;
  state.redirect = null;
  return address;
}

/** Opens a stream to the next scheduler and registers on it; `end` moves on from it once. */
function attempt(state: ClientState) {
  const address = nextAddress(state);
  const c = new state.Control(address, state.credentials, { ...KEEPALIVE, ...state.channelOptions });
  const stream = c.Connect(tokenMetadata(state.options.security));
  state.client = c;
  state.call = stream;
  let ended = false;
  const end = (delay: number) => {
    clearTimeout(unanswered);
    if (ended || state.call !== stream) return;
    ended = true;
    state.failed = address;
    stream.cancel();
    next(state, delay);
  };
  const unanswered = setTimeout(() => end(0), WELCOME_TIMEOUT_MS).unref();
  stream.on('data', (message: SchedulerMessage__Output) => {
    clearTimeout(unanswered);
    onMessage(state, address, message, end);
  });
  stream.on('error', (err: grpc.ServiceError) => {
    state.emit('control_error', { address, error: err.message });
    if (FINAL.has(err.code)) {
      clearTimeout(unanswered);
      return refused(state, `scheduler ${address} refused this worker: ${err.details}`);
    }
    end(state.retryMs);
  });
  stream.on('end', () => end(state.retryMs));
  stream.write({
    body: 'register',
    register: { worker_id: state.options.workerId, models: state.options.slots(), instance: state.instance },
  });
}

/** A scheduler's welcome starts the heartbeat; a redirect moves on; a drain is passed to the worker. */
function onMessage(
  state: ClientState,
  address: string,
  { welcome, redirect: to, drain }: SchedulerMessage__Output,
  end: (delay: number) => void,
) {
  if (welcome) {
    state.failed = null;
    state.connectedTo = address;
    state.emit('control_connected', { address, scheduler: welcome.scheduler_id });
    clearInterval(state.timer);
    state.timer = setInterval(() => heartbeat(state), Math.max(50, welcome.heartbeat_ms));
    heartbeat(state);
  } else if (to) {
    // An older leader may advertise an unbracketed IPv6 address.
    const leader = to.leader_addr && normaliseControlAddress(to.leader_addr);
    state.emit('control_redirect', { address, leader });
    state.redirect = leader && leader !== address ? leader : null;
    end(state.redirect ? 0 : state.retryMs);
  } else if (drain) {
    state.options.onDrain(drain.deadline_ms);
  }
}

function refused(state: ClientState, message: string) {
  stop(state);
  state.options.onRefused(message);
}

function stop(state: ClientState) {
  state.closed = true;
  clearTimeout(state.retry);
  clearInterval(state.timer);
  state.call?.cancel();
  state.client?.close();
}
