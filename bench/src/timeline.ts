/**
 * A MONITOR timeline of one task across every process: which durable writes stand one after
 * another between `POST /lmsp/v1/tasks` and the first delta's append (issue item 7b), and how
 * many commands one task costs, BullMQ's share apart.
 */
import { connect } from 'node:net';
import type { Redis } from 'ioredis';
import { monitorArgs } from '@taskline/testing';
import { schedulerKeys, taskKeys } from '@taskline/engine/keys';
import { createTask } from './http.js';
import { nowMs, round, sleep } from './stats.js';
import { waitEnded } from './taskline.js';

interface Line {
  /** Redis's clock, ms. */
  at: number;
  /** `host:port` of the client that sent it, or `lua` for a command a script ran. */
  client: string;
  args: string[];
}

/** One client's top-level commands sent together (a pipeline), with what their scripts ran. */
interface Group {
  at: number;
  client: string;
  lines: Line[];
}

export interface PathStage {
  stage: string;
  /** Whether its round trip waits for an fsync: false when none of its stages writes to the AOF. */
  durable: boolean;
  /** The connection name of the process that sent it. */
  process: string;
  /** From the first stage's arrival, ms (Redis's clock). */
  atMs: number;
}

export interface PathTimeline {
  model: string;
  /** The stages found, in order; stages that ride in one round trip share a row. */
  stages: PathStage[];
  /** Durable round trips one after another from the create to the first delta's append (`durable` stages). */
  durableInARow: number;
  /** Commands Redis ran for the task (scripts' own included), and how many of them were BullMQ's. */
  commands: number;
  bullmqCommands: number;
}

const PIPELINE_GAP_MS = 0.2;

/**
 * Each stage as found in a group of the timeline: a predicate over its commands, and whether its
 * writes reach the AOF (a round trip that writes only what is kept in memory waits for no fsync).
 */
const STAGES: { stage: string; durable: boolean; match: (args: string[], id: string) => boolean }[] = [
  {
    stage: 'rate limit',
    // token_bucket.lua keeps the bucket and the create's place out of the AOF (redis.set_repl).
    durable: false,
    match: (a) => a[0] === 'evalsha' && a.some((x) => x.startsWith('tl:api:rate:')),
  },
  {
    stage: 'record and offer',
    durable: true,
    match: (a, id) =>
      a[0] === 'XADD' && a[1] === taskKeys(id).events && a[3] === 'type' && a[4] === 'response.created',
  },
  {
    // By dispatch.lua in a round, or by the offer itself on a slot the leader lent (enqueue.lua).
    stage: 'pick',
    durable: true,
    match: (a, id) => a[0] === 'ZADD' && a[1] === schedulerKeys.inflight && a.includes(id),
  },
  {
    stage: "BullMQ's add",
    durable: true,
    match: (a, id) => a[0] === 'HMSET' && a[1]!.startsWith('bull:') && a[1]!.includes(`:${id}-`),
  },
  {
    stage: 'move to active',
    durable: true,
    match: (a, id) => a[0] === 'SET' && a[1]!.includes(`:${id}-`) && a[1]!.endsWith(':lock'),
  },
  {
    stage: 'claim',
    durable: true,
    match: (a, id) => a[0] === 'HSET' && a[1] === taskKeys(id).task && a.includes('lease_owner'),
  },
  {
    stage: 'first delta append',
    durable: true,
    match: (a, id) =>
      a[0] === 'XADD' && a[1] === taskKeys(id).events && a.includes('response.output_text.delta'),
  },
];

/**
 * Creates one task (after the stack is warm) under MONITOR and reads its way through Redis. With
 * `model` an instant task the stages stop at the claim (no deltas); the command counts hold.
 */
export async function pathTimeline(redis: Redis, apiUrl: string, model: string): Promise<PathTimeline> {
  const { host, port } = redis.options;
  const names = new Map<string, string>();
  for (const row of String(await redis.client('LIST')).split('\n')) {
    const addr = /addr=(\S+)/.exec(row)?.[1];
    if (addr) names.set(addr, /name=(\S*)/.exec(row)?.[1] ?? '');
  }
  const lines: Line[] = [];
  const socket = connect(Number(port), host!);
  socket.setEncoding('latin1');
  socket.on('error', () => undefined); // a lost MONITOR only shortens the timeline
  let buffered = '';
  let ready!: () => void;
  const readyP = new Promise<void>((r) => (ready = r));
  socket.on('connect', () => socket.write('MONITOR\r\n'));
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    let end: number;
    while ((end = buffered.indexOf('\r\n')) >= 0) {
      const raw = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      if (raw === '+OK') ready();
      const m = /^\+(\d+\.\d+) \[\d+ ([^\]]+)\]/.exec(raw);
      if (m) lines.push({ at: Number(m[1]) * 1000, client: m[2]!, args: monitorArgs(raw) });
    }
  });
  let id: string;
  try {
    await readyP;
    const input = model === 'instant' ? 'timeline' : 'Say something.';
    const t0 = nowMs();
    id = await createTask(apiUrl, { model, input, max_output_tokens: 8 });
    await waitEnded(redis, [id], 10);
    // The worker's finishing writes to BullMQ follow the task's end.
    await sleep(Math.max(200, nowMs() - t0));
  } finally {
    socket.destroy();
  }

  // A pipeline's commands run back to back in one pass of Redis's loop, microseconds apart; the
  // same client's next round trip comes a reply (and an fsync) later.
  const groups: Group[] = [];
  for (const line of lines) {
    const last = groups.at(-1);
    const lastAt = last?.lines.at(-1)?.at ?? -Infinity;
    if (line.client === 'lua' || (last?.client === line.client && line.at - lastAt < PIPELINE_GAP_MS))
      last?.lines.push(line);
    else groups.push({ at: line.at, client: line.client, lines: [line] });
  }
  // The task's commands: groups naming it (its keys, its job) and the rate limit just before its
  // record; not this benchmark's own reads of it.
  const self = String(await redis.client('GETNAME'));
  const mine = groups.filter(
    (g) => names.get(g.client) !== self && g.lines.some((l) => l.args.some((a) => a.includes(id))),
  );
  const found: { stage: string; durable: boolean; group: Group }[] = [];
  for (const { stage, durable, match } of STAGES) {
    const group =
      stage === 'rate limit'
        ? // Its place under the cap is held under the task's id: the rate limit may name the task.
          groups
            .slice(0, groups.indexOf(mine[0]!) + 1)
            .reverse()
            .find((g) => g.client === mine[0]?.client && g.lines.some((l) => match(l.args, id)))
        : mine.find((g) => g.lines.some((l) => match(l.args, id)));
    if (group) found.push({ stage, durable, group });
  }
  const rate = found.find((f) => f.stage === 'rate limit')?.group;
  const counted = rate && !mine.includes(rate) ? [rate, ...mine] : mine;
  const commands = counted.reduce((n, g) => n + g.lines.length, 0);
  const bullmqCommands = counted.reduce((n, g) => n + (bullmq(g) ? g.lines.length : 0), 0);
  const start = found[0]?.group.at ?? 0;
  const stages: PathStage[] = [];
  const seen = new Map<Group, PathStage>();
  for (const { stage, durable, group } of found) {
    const row = seen.get(group);
    if (row) {
      row.stage += ` + ${stage}`;
      row.durable ||= durable;
    } else {
      const named = names.get(group.client) || (bullmq(group) ? 'a BullMQ connection' : group.client);
      const s = { stage, durable, process: named, atMs: round(group.at - start, 2) };
      seen.set(group, s);
      stages.push(s);
    }
  }
  const durableInARow = stages.filter((s) => s.durable).length;
  return { model, stages, durableInARow, commands, bullmqCommands };
}

/** A group BullMQ sent: its first command names a key under BullMQ's prefix. */
const bullmq = (g: Group) => g.lines[0]!.args.some((a) => a.startsWith('bull:'));
