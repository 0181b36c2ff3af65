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

/**
 * Keeps a worker registered with the scheduler leader: connects to the first address that
 * accepts, follows a standby's redirect, heartbeats at the interval the leader asks for, and
 * moves on to the next address whenever the stream breaks (e.g. the leader died).
 */
export function connectControl(options: ControlClientOptions): ControlClient {
  const Control = controlService();
  const emit = options.onEvent ?? (() => undefined);
  const { credentials, options: channelOptions } = clientCredentials(options.security);
  /** This process's registrations, told apart from another process's under the same id. */
  const instance = randomUUID();
  const retryMs = options.retryMs ?? 250;
  let closed = false;
  let index = 0;
  let redirect: string | null = null;
  /** The address whose stream broke last: the next attempt goes elsewhere when it can. */
  let failed: string | null = null;
  let call: ControlCall | null = null;
  let client: grpc.Client | null = null;
  let connectedTo: string | null = null;
  let timer: NodeJS.Timeout | undefined;
  let retry: NodeJS.Timeout | undefined;

  const heartbeat = () =>
    call?.write({
      body: 'heartbeat',
      heartbeat: {
        models: options.slots(),
        draining: options.draining(),
        lease_renewals: options.leaseRenewals?.() ?? 0,
      },
    });

  const next = (delay: number) => {
    clearInterval(timer);
    connectedTo = null;
    call = null;
    client?.close();
    client = null;
    if (closed) return;
    retry = setTimeout(attempt, delay);
  };

  const addresses = options.addresses.map(normaliseControlAddress);

  function attempt() {
    if (!redirect && addresses.length > 1 && addresses[index % addresses.length] === failed) index++;
    const address = redirect ?? addresses[index % addresses.length]!;
    if (!redirect) index++;
    redirect = null;
    const c = new Control(address, credentials, { ...KEEPALIVE, ...channelOptions });
    const stream = c.Connect(tokenMetadata(options.security));
    client = c;
    call = stream;
    let ended = false;
    const end = (delay: number) => {
      clearTimeout(unanswered);
      if (ended || call !== stream) return;
      ended = true;
      failed = address;
      stream.cancel();
      next(delay);
    };
    const unanswered = setTimeout(() => end(0), WELCOME_TIMEOUT_MS).unref();
    stream.on('data', ({ welcome, redirect: to, drain }: SchedulerMessage__Output) => {
      clearTimeout(unanswered);
      if (welcome) {
        failed = null;
        connectedTo = address;
        emit('control_connected', { address, scheduler: welcome.scheduler_id });
        clearInterval(timer);
        timer = setInterval(heartbeat, Math.max(50, welcome.heartbeat_ms));
        heartbeat();
      } else if (to) {
        // An older leader may advertise an unbracketed IPv6 address.
        const leader = to.leader_addr && normaliseControlAddress(to.leader_addr);
        emit('control_redirect', { address, leader });
        redirect = leader && leader !== address ? leader : null;
        end(redirect ? 0 : retryMs);
      } else if (drain) {
        options.onDrain(drain.deadline_ms);
      }
    });
    stream.on('error', (err: grpc.ServiceError) => {
      emit('control_error', { address, error: err.message });
      if (FINAL.has(err.code)) {
        clearTimeout(unanswered);
        return refused(`scheduler ${address} refused this worker: ${err.details}`);
      }
      end(retryMs);
    });
    stream.on('end', () => end(retryMs));
    stream.write({
      body: 'register',
      register: { worker_id: options.workerId, models: options.slots(), instance },
    });
  }

  function refused(message: string) {
    stop();
    options.onRefused(message);
  }

  function stop() {
    closed = true;
    clearTimeout(retry);
    clearInterval(timer);
    call?.cancel();
    client?.close();
  }

  attempt();
  return {
    get connectedTo() {
      return connectedTo;
    },
    report: heartbeat,
    close: stop,
  };
}
