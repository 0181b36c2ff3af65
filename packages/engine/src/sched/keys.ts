/**
 * The scheduler's index, `{sched}`: its key layout and its invariants, stated here once. Only the
 * files of `src/sched/` name these keys or run the scripts that write them (`pnpm lint` fails
 * otherwise: scripts/check-sched.ts); the rest of the engine calls the operations of
 * `SchedIndex` (./index.ts), dispatch (./dispatch.ts) and leadership (./leader.ts).
 *
 * Why one slot: a dispatch round picks fairly across every tenant in one script (dispatch.lua
 * builds each tenant's keys from prefixes in its ARGV). The index holds ids and scores only; the
 * task record (another slot) is the truth, so every write here is a separate step from the task's
 * script, ordered so that a crash between the two leaves an entry a sweep repairs, never a task no
 * sweep sees. The repairs ("Repaired by") run on the leader scheduler (services/scheduler).
 *
 * - `intake` (zset id -> ms): the create journal. Written before the task record; dropped by the
 *   offer (enqueue.lua) or once the task is known not queued. An answer to a task not ended writes
 *   one too, before its script (the task may park in between and the answer resume it); dropped
 *   by the offer after a resume, or at once when the task ended; an answer that resumed nothing
 *   leaves it (the entry is one per task, a concurrent answer may need it). Repaired by
 *   `reconcileIntake`: a queued task is offered, any other entry dropped only if no answer wrote
 *   it again after the read (lease_unindex.lua).
 * - `ready:<model>:<tenant>` (zset id -> created ms): tasks waiting for dispatch on one model (its
 *   queue; MCP tool tasks have the model `tools`). Split by model so a model with no free worker
 *   never holds back a tenant's tasks for other models. Written by enqueue.lua, taken by
 *   dispatch.lua, dropped by a cancel of a queued task.
 * - `tenants:<model>`, `models` (sets): tenants with ready work on a model, models with ready work
 *   (what queue-depth metrics walk, so a model no worker serves still shows its backlog).
 * - `offered` (hash id -> `<attempt>:<seq>`): the queued state each ready task was offered in,
 *   handed on by dispatch.lua so the scheduler names the BullMQ job without reading the task. An
 *   offer never replaces a newer state (enqueue.lua returns 0, as for a newer place: the caller's
 *   read is outdated and a newer offer or dispatch holds the task). A pick without one stays in
 *   `inflight` for the reconciler.
 * - `active:<tenant>` (zset id -> attempt): a tenant's dispatched, unfinished tasks, what its
 *   concurrency cap counts. Dispatch adds, scored by the attempt the pick's claim starts (one past
 *   the offered state's). Removed by the end of a task (`Releases`, after the ending script), by a
 *   park (only the asking attempt's place: park_unindex.lua), by a claim refused for an ended task.
 *   An offer removes a place only when scored at most the attempt its caller read queued; one
 *   above is a newer dispatch, and the task is then not offered. Repaired by `sweepActive`
 *   (retention loop): drops places of ended, expired or parked tasks only as read
 *   (place_unindex.lua), and offers again a task queued with no ready entry, no pick in flight and
 *   no job. A tool task's child generations are indexed (`ready:`, `active:`) under
 *   `<tenant>/children` (`childrenQueue`), a name no tenant id can take, so a child always finds
 *   room while its parent holds a place.
 * - `rr:<model>` (hash): the round-robin cursor of dispatch.lua (the tenant served last and what
 *   is left of its turn).
 * - `loans` (hash: `leader`, `cap`, `m:<model>` -> slots): free worker slots the leader lent to the
 *   creates (lend.lua), with the token it lent them under and its cap on a tenant's running tasks.
 *   A create (enqueue.lua) whose model has no ready task takes one while the lease still names
 *   that token, dispatching its own task: a place in `active:`, a pick in `inflight`, no offer.
 *   Every round's loan replaces the last, whose leftover tells the leader how many were taken.
 * - `inflight` (zset id -> pick ms): picks whose BullMQ job is not known queued yet; dropped by
 *   `handedOver`. Repaired by `reconcileDispatches` (reconcile loop): an entry older than
 *   `TASKLINE_RECONCILE_AFTER_MS` is dropped, its task offered again if still queued with no job.
 * - `leases` (zset id -> lease deadline, Redis's clock: lease_index.lua, renew.lua): what the
 *   recovery sweep scans by that clock; the authoritative lease is in the task hash. A claim writes
 *   its entry before its script (`NX`: never moving a holder's deadline), and takes it back when
 *   refused for a task that goes on (claim_unindex.lua, unless re-indexed or dispatched since);
 *   a claim that went through without it writes its own. Removed by an end (`Releases`) and a park
 *   (park_unindex.lua). Repaired by `sweepLeases` (recovery loop): a lapsed lease gets the task's
 *   `on_restart`; an entry of a task nobody holds is dropped as read (lease_unindex.lua).
 * - `held` (zset id -> lease deadline, Redis's clock): calls held open by their caller, leased by
 *   the api replica holding them (`CallHolds`: one write per call begun or ended, one renewal of
 *   all every third of the lease, `GT`). Repaired by `sweepHeldCalls` (recovery loop): the task of
 *   a lapsed entry is cancelled, then the entry dropped unless renewed meanwhile.
 * - `parked` (zset id -> input deadline): tasks parked waiting for their caller's input, what the
 *   parked gauge counts. Written before the park; an ask refused after writing it puts back what
 *   it found (lease_unindex.lua). Dropped once answered, cancelled or ended. Repaired by
 *   `sweepInputDeadlines` (recovery loop): fails a task past its deadline (`input_timeout`) and
 *   drops entries of tasks no longer waiting, as read.
 * - `leader` (string `<token> <control address>`): the scheduler leader's fenced lease (`SET NX
 *   PX`; leader_renew.lua and every dispatch check the token).
 * - `wake` (channel): enqueue.lua publishes the offered task's model, so the leader dispatches at
 *   once rather than at its next poll.
 * - `workers` (string, JSON): the leader's copy of its worker registry for the console, rewritten
 *   every second and short-lived (workers report only to the leader, over gRPC).
 */
export const schedulerKeys = {
  intake: 'tl:{sched}:intake',
  models: 'tl:{sched}:models',
  tenants: (model: string) => `tl:{sched}:tenants:${model}`,
  ready: (tenant: string, model: string) => `tl:{sched}:ready:${model}:${tenant}`,
  offered: 'tl:{sched}:offered',
  leases: 'tl:{sched}:leases',
  held: 'tl:{sched}:held',
  leader: 'tl:{sched}:leader',
  parked: 'tl:{sched}:parked',
  active: (tenant: string) => `tl:{sched}:active:${tenant}`,
  rr: (model: string) => `tl:{sched}:rr:${model}`,
  inflight: 'tl:{sched}:inflight',
  loans: 'tl:{sched}:loans',
  wake: 'tl:{sched}:wake',
  workers: 'tl:{sched}:workers',
} as const;

/** A queued state of a task: attempt and event sequence both move whenever it is queued again. */
export interface QueuedState {
  attempt: number;
  seq: number;
}

/** How `schedulerKeys.offered` writes a queued state. */
export const offeredState = (state: QueuedState): string => `${state.attempt}:${state.seq}`;

/** The queued state `offeredState` wrote, or null for none (an entry offered without one). */
export function parseOfferedState(value: string): QueuedState | null {
  const at = value.indexOf(':');
  if (at < 0) return null;
  return { attempt: Number(value.slice(0, at)), seq: Number(value.slice(at + 1)) };
}
