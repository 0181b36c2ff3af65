import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { CHART, render } from './helm-tool.js';
import { find } from './manifests.js';

// The KEDA queries as the chart renders them for namespace team-a (the gpu-worker's, and the tool
// pools' of examples/tool-workers.yaml), evaluated by promtool as recording rules against series
// of two namespaces and two scheduler replicas.
const rendered = render({ namespace: 'team-a', files: [`${CHART}/examples/tool-workers.yaml`] });
const queryOf = (name: string) =>
  find<{ spec: { triggers: { metadata: { query: string } }[] } }>(rendered, 'ScaledObject', name).spec
    .triggers[0]!.metadata.query;
const query = queryOf('taskline-gpu-worker');

/** Series of team-b (another release) and of a standby scheduler that lost leadership. */
const NOISE = [
  {
    series: 'taskline_queue_depth{namespace="team-b",pod="s9",model="tiny-chat",tenant="acme"}',
    values: '100x10',
  },
  { series: 'taskline_scheduler_leader{namespace="team-b",pod="s9"}', values: '1x10' },
  {
    series: 'taskline_worker_slots{namespace="team-b",pod="w9",model="tiny-chat",state="busy"}',
    values: '50x10',
  },
  {
    series: 'taskline_queue_depth{namespace="team-a",pod="s2",model="tiny-chat",tenant="acme"}',
    values: '7x10',
  },
  { series: 'taskline_scheduler_leader{namespace="team-a",pod="s2"}', values: '0x10' },
];

function expectLoad(
  name: string,
  series: { series: string; values: string }[],
  load: number,
  expr: string = query,
) {
  const dir = mkdtempSync(join(tmpdir(), 'taskline-keda-'));
  try {
    writeFileSync(
      join(dir, 'keda.yaml'),
      stringify({ groups: [{ name: 'keda', rules: [{ record: 'keda:load', expr }] }] }),
    );
    writeFileSync(
      join(dir, 'keda.test.yaml'),
      stringify({
        rule_files: ['keda.yaml'],
        evaluation_interval: '1m',
        tests: [
          {
            name,
            interval: '1m',
            input_series: [...series, ...NOISE],
            promql_expr_test: [
              { expr: 'keda:load', eval_time: '5m', exp_samples: [{ labels: 'keda:load', value: load }] },
            ],
          },
        ],
      }),
    );
    execFileSync('promtool', ['test', 'rules', join(dir, 'keda.test.yaml')], { stdio: 'pipe' });
  } catch (err) {
    assert.fail(`${name}: ${String((err as { stdout?: Buffer }).stdout ?? err)}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('no workers and a backlog: the query counts the backlog, so KEDA scales from zero', () => {
  expectLoad(
    'scale from zero',
    [
      {
        series: 'taskline_queue_depth{namespace="team-a",pod="s1",model="tiny-chat",tenant="acme"}',
        values: '3x10',
      },
      { series: 'taskline_scheduler_leader{namespace="team-a",pod="s1"}', values: '1x10' },
    ],
    3,
  );
});

test('busy workers and an empty queue: the query counts running work, so no scale-down mid-generation', () => {
  expectLoad(
    'no scale-down',
    [
      { series: 'taskline_scheduler_leader{namespace="team-a",pod="s1"}', values: '1x10' },
      {
        series: 'taskline_worker_slots{namespace="team-a",pod="w1",model="tiny-chat",state="busy"}',
        values: '2x10',
      },
      {
        series: 'taskline_worker_slots{namespace="team-a",pod="w1",model="tiny-chat",state="free"}',
        values: '2x10',
      },
    ],
    2,
  );
});

test("nothing in this namespace: another namespace and a standby's stale gauge count for nothing", () => {
  expectLoad('two namespaces', [], 0);
});

test('the query check fails when the load is wrong', () => {
  assert.throws(() => expectLoad('wrong', [], 1));
});

/** A waiting-task series of team-a's leader, and its busy slots, for one model. */
const leader = { series: 'taskline_scheduler_leader{namespace="team-a",pod="s1"}', values: '1x10' };
const waiting = (model: string, n: number) => ({
  series: `taskline_queue_depth{namespace="team-a",pod="s1",model="${model}",tenant="acme"}`,
  values: `${n}x10`,
});
const busy = (model: string, n: number) => ({
  series: `taskline_worker_slots{namespace="team-a",pod="w2",model="${model}",state="busy"}`,
  values: `${n}x10`,
});

test("a tool pool scales on its own tools' queues only, from zero", () => {
  const ci = queryOf('taskline-tool-ci');
  const others = [waiting('tiny-chat', 5), waiting('tool:import_dataset', 7), busy('tools', 3)];
  expectLoad('ci backlog, no worker', [leader, waiting('tool:run_ci_pipeline', 2), ...others], 2, ci);
  expectLoad('ci busy', [leader, busy('tool:run_ci_pipeline', 1), ...others], 1, ci);
  // Tool names are matched literally: `import.status` is not `importXstatus`.
  const imports = queryOf('taskline-tool-imports');
  expectLoad(
    'imports',
    [
      leader,
      waiting('tool:import.status', 1),
      waiting('tool:importXstatus', 9),
      waiting('tool:import_dataset', 2),
    ],
    3,
    imports,
  );
});

test("the gpu-worker does not scale on tool pools' queues; built-in tool tasks (model tools) still count", () => {
  expectLoad(
    'gpu',
    [leader, waiting('tool:run_ci_pipeline', 8), busy('tool:run_ci_pipeline', 2), waiting('tools', 1)],
    1,
  );
});
