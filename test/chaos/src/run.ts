/**
 * The chaos run (`pnpm test:chaos`): the local production shape (cluster.ts) under steady mixed
 * load (load.ts) while random api, scheduler and worker processes are SIGKILLed and restarted, and
 * Redis is SIGKILLed once and restarted from its AOF and its connections are dropped every few
 * seconds (faults.ts), one worker's clock 5 s behind, and webhooks go to a flaky receiver (webhooks.ts). Then it checks Taskline's
 * promises (invariants.ts; see README.md in this folder), sheds an overload (overload.ts), and
 * writes test/chaos/report/latest.{json,md} (report.ts). Exit code 1 when an invariant broke, 2
 * when the run itself failed (a phase past its bound names itself). Loopback only; bounded by
 * TASKLINE_CHAOS_SECONDS (default 60).
 */
import { bounded } from '@taskline/testing';
import { startChaosStack, stopChaosStack, type ChaosStack } from './chaos-stack.js';
import { faultLoop, REDIS_FAULTS } from './faults.js';
import { checkInvariants } from './invariants.js';
import { lastToSettle, runLoad, stillOpen, type Inflight } from './load.js';
import { requireMinimums } from './minimums.js';
import { faults, LOG_DIR, SECONDS, TERMINAL_BOUND_MS, tracked } from './observed.js';
import { overload } from './overload.js';
import { buildReport, writeReport } from './report.js';
import * as tools from './tools.js';
import { visibleInvariants } from './visible.js';
import { startFlakyReceiver, checkWebhooks } from './webhooks.js';
import { checkWorkerToolTasks } from './worker-tools.js';

/** The cluster once started: a run that fails stops it too, so no process outlives the run. */
let running: ChaosStack | null = null;

/** Where the run's time went: each phase's end, in seconds since the start. */
const mark = (phase: string) =>
  process.stdout.write(`chaos: ${phase} at ${Math.round(performance.now() / 1000)} s\n`);

async function main() {
  process.stdout.write(`chaos: ${SECONDS} s of load and faults; logs in ${LOG_DIR}\n`);
  const c = await startChaosStack();
  mark('stack up');
  running = c;
  const receiver = await bounded('the webhook receiver', 30_000, startFlakyReceiver(c.lb));
  const until = Date.now() + SECONDS * 1000;
  const inflight: Inflight[] = [];
  const load = Promise.all([runLoad(c, until, inflight), faultLoop(c, until)]);
  await bounded('the load and the faults', SECONDS * 1000 + 120_000, load);
  mark('load and faults done');
  const loadDone = Date.now();
  // Every process back up before the checks: the system must finish what it acknowledged.
  for (const s of [...c.apis, ...c.schedulers, ...c.workers, ...c.toolWorkers])
    if (!s.running) await bounded(`the restart of ${s.name}`, 150_000, s.start());
  // Every request has its own timeout and every reader its deadline (the terminal bound).
  await bounded(
    "the load's last requests",
    TERMINAL_BOUND_MS + 60_000,
    Promise.all(inflight.map((e) => e.done)),
  ).catch((err: Error) => {
    throw new Error(`${err.message}; still open: ${stillOpen(inflight)}`);
  });
  mark(`restarts and last requests done (last to settle: ${lastToSettle(inflight, loadDone)})`);
  const checks = async () => {
    const found = [
      ...(await checkInvariants(c)),
      ...(await tools.checkToolTasks(c.store, c.lb)),
      ...(await checkWorkerToolTasks(c.store)),
    ];
    found.push(...(await visibleInvariants(c.store, [...tracked.values()])).invariants);
    mark('task checks done');
    const hooks = await checkWebhooks(c.store, receiver);
    process.stdout.write(`chaos: webhooks ${JSON.stringify(hooks.stats)}\n`);
    found.push(hooks.invariant);
    return found;
  };
  const invariants = await bounded('the invariant checks', 2 * TERMINAL_BOUND_MS + 60_000, checks());
  mark('invariant checks done');
  invariants.push(requireMinimums(invariants, faults, tools.REQUIRED_FAULTS, REDIS_FAULTS));
  const overloadResult = await bounded('the overload', SECONDS * 100 + 120_000, overload(c));
  mark('overload done');
  const broken = writeReport(buildReport(invariants, overloadResult));
  await stopChaosStack(c);
  await receiver.close();
  process.exit(broken ? 1 : 0);
}

main().catch(async (err: unknown) => {
  process.stderr.write(`chaos run failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  if (running) await bounded('stopping the cluster', 30_000, stopChaosStack(running)).catch(() => undefined);
  process.exit(2);
});
