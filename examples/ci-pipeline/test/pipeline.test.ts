// The example's own logic, with a test double of the SDK's ToolContext: real git, npm and child processes, no tool worker.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { InputRequest, Json, ToolContext, ToolResult } from '@taskline/tool-sdk';
import { runPipeline, type Checkpoint, type PipelineOptions } from '../src/pipeline.js';
import { deploy } from '../src/deploy.js';

const OPTIONS: PipelineOptions = { killGraceMs: 500, progressIntervalMs: 0 };
const APPROVED = { approve_deploy: { action: 'accept', content: { approve: true } } };
const STEPS = ['clone', 'install', 'test', 'build'];

let root: string;
before(() => {
  root = mkdtempSync(join(tmpdir(), 'ci-pipeline-test-'));
  // The steps run npm as a team's CI would, without the settings pnpm hands this process: npm warns
  // on stderr of one it does not know (onnxruntime-node-install), and a step's last line could be
  // that warning or its own last stdout line, whichever pipe was read last.
  for (const name of Object.keys(process.env)) if (name.startsWith('npm_config_')) delete process.env[name];
});
after(() => rmSync(root, { recursive: true, force: true }));

/** A local git repository whose npm scripts are the given files (test.js, build.js). */
function fixtureRepo(name: string, files: Record<string, string>): string {
  const dir = join(root, name);
  mkdirSync(dir);
  const pkg = {
    name,
    version: '1.0.0',
    private: true,
    scripts: { test: 'node test.js', build: 'node build.js' },
  };
  writeFileSync(join(dir, 'package.json'), JSON.stringify(pkg));
  // A lockfile with no dependencies: `npm ci` runs offline.
  const lock = { name, version: '1.0.0', lockfileVersion: 3, requires: true, packages: { '': pkg } };
  writeFileSync(join(dir, 'package-lock.json'), JSON.stringify(lock));
  for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, stdio: 'pipe' });
  git('init', '--quiet');
  git('add', '.');
  git('-c', 'user.name=test', '-c', 'user.email=test@example.com', 'commit', '--quiet', '-m', 'fixture');
  return dir;
}

const PASSING = {
  'test.js': "console.log('3 tests passed');\n",
  'build.js': "require('fs').mkdirSync('dist');\nrequire('fs').writeFileSync('dist/app.txt', 'built');\n",
};

/** The ToolContext double: records what the tool did, in order, and answers `ask` as told. */
function fakeContext(o: { resumed?: Json; answers?: Record<string, unknown> | 'pending'; key?: string }) {
  const controller = new AbortController();
  const events: string[] = [];
  const checkpoints: Checkpoint[] = [];
  const asked: Record<string, InputRequest>[] = [];
  const ctx: ToolContext = {
    taskId: 'task-1',
    tenant: 'acme',
    attempt: 1,
    signal: controller.signal,
    resumed: o.resumed,
    idempotencyKey: o.key ?? 'key-1',
    log: { info() {}, warn() {}, error() {} },
    async progress(message) {
      events.push(`progress ${message}`);
    },
    async checkpoint(state) {
      const c = structuredClone(state) as unknown as Checkpoint;
      checkpoints.push(c);
      events.push(`checkpoint ${c.completed.at(-1)}`);
    },
    async ask(requests) {
      asked.push(requests);
      events.push('ask');
      // As the runtime does for a question not answered yet: the attempt ends here.
      if (o.answers === 'pending') {
        controller.abort('input_required');
        throw new Error('input required');
      }
      return o.answers ?? {};
    },
    async awaitCallback() {
      throw new Error('not used');
    },
    async generate() {
      throw new Error('not used');
    },
  };
  return { ctx, controller, events, checkpoints, asked };
}

const started = (events: string[]) =>
  events.filter((e) => e.endsWith(': started')).map((e) => e.slice('progress '.length).split(':')[0]);
const structured = (r: ToolResult) => r.structuredContent as Record<string, unknown>;

/** A workspace with every step done, as an attempt that stopped at the approval question leaves it. */
let built: { repo: string; checkpoint: Checkpoint; earlier: Checkpoint[] };
before(async () => {
  const repo = fixtureRepo('passing', PASSING);
  const f = fakeContext({ answers: 'pending' });
  await assert.rejects(
    runPipeline({ repository: repo, deploy_to: join(root, 'unused'), artifact: 'dist' }, f.ctx, OPTIONS),
  );
  built = { repo, checkpoint: f.checkpoints.at(-1)!, earlier: f.checkpoints };
});

/** A copy of the built workspace, so each test resumes from its own. */
function builtCopy(completed = STEPS): Checkpoint {
  const workspace = mkdtempSync(join(root, 'ws-'));
  cpSync(built.checkpoint.workspace, workspace, { recursive: true });
  return { workspace, completed };
}

test('the steps run in order, a checkpoint after each, then the question, then the deploy once approved', async () => {
  const repo = fixtureRepo('in-order', PASSING);
  const target = join(root, 'deploy-in-order');
  const f = fakeContext({ answers: APPROVED, key: 'task-in-order' });
  const result = await runPipeline({ repository: repo, deploy_to: target, artifact: 'dist' }, f.ctx, OPTIONS);
  assert.equal(structured(result).status, 'deployed', JSON.stringify(result));
  assert.deepEqual(
    f.events.filter((e) => e.startsWith('checkpoint') || e === 'ask' || e.endsWith(': started')),
    STEPS.flatMap((s) => [`progress ${s}: started`, `checkpoint ${s}`]).concat('ask'),
  );
  assert.deepEqual(
    f.checkpoints.map((c) => c.completed),
    STEPS.map((_, i) => STEPS.slice(0, i + 1)),
  );
  assert.equal(new Set(f.checkpoints.map((c) => c.workspace)).size, 1, 'one workspace throughout');
  // The steps' output is streamed as progress.
  assert.ok(f.events.includes('progress test: 3 tests passed'), f.events.join('\n'));
  const schema = f.asked[0]!.approve_deploy!.params.requestedSchema as {
    properties: Record<string, unknown>;
  };
  assert.deepEqual(schema.properties.approve, {
    type: 'boolean',
    title: 'Deploy',
    description: 'Yes to deploy.',
  });
  assert.equal(readFileSync(join(target, 'release-task-in-order', 'app.txt'), 'utf8'), 'built');
  assert.equal(existsSync(f.checkpoints[0]!.workspace), false, 'the workspace is removed at the end');
});

test('a resumed attempt skips the completed steps and continues in the same workspace', async () => {
  const resumed = builtCopy(['clone', 'install']);
  // The build step runs again: its output must come from this attempt.
  rmSync(join(resumed.workspace, 'src', 'dist'), { recursive: true });
  const target = join(root, 'deploy-resumed');
  const f = fakeContext({ resumed: { ...resumed }, answers: APPROVED });
  const result = await runPipeline(
    { repository: built.repo, deploy_to: target, artifact: 'dist' },
    f.ctx,
    OPTIONS,
  );
  assert.equal(structured(result).status, 'deployed', JSON.stringify(result));
  assert.deepEqual(started(f.events), ['test', 'build']);
  assert.deepEqual(f.checkpoints.at(-1), { workspace: resumed.workspace, completed: STEPS });
  assert.equal(readFileSync(join(target, 'release-key-1', 'app.txt'), 'utf8'), 'built');
});

test('an attempt after the approval is answered runs no step again', async () => {
  const f = fakeContext({ resumed: { ...builtCopy() }, answers: APPROVED, key: 'answered' });
  const target = join(root, 'deploy-answered');
  const result = await runPipeline(
    { repository: built.repo, deploy_to: target, artifact: 'dist' },
    f.ctx,
    OPTIONS,
  );
  assert.equal(structured(result).status, 'deployed');
  assert.deepEqual(started(f.events), []);
  assert.deepEqual(f.checkpoints, []);
  assert.ok(
    existsSync(join(target, 'release-answered', 'app.txt')),
    "existsSync(join(target, 'release-answered', 'app.txt'))",
  );
});

test('a checkpoint whose workspace is gone runs every step again, in a new workspace', async () => {
  const gone = { workspace: join(root, 'no-such-workspace'), completed: STEPS };
  const f = fakeContext({ resumed: gone, answers: APPROVED, key: 'gone' });
  const result = await runPipeline(
    { repository: built.repo, deploy_to: join(root, 'deploy-gone'), artifact: 'dist' },
    f.ctx,
    OPTIONS,
  );
  assert.equal(structured(result).status, 'deployed');
  assert.deepEqual(started(f.events), STEPS);
  assert.notEqual(f.checkpoints[0]!.workspace, gone.workspace);
});

test('nothing is deployed unless approved: declined, or a caller that cannot answer', async () => {
  const declined = { approve_deploy: { action: 'accept', content: { approve: false } } };
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['declined', declined, /not approved/],
    ['rejected-form', { approve_deploy: { action: 'decline' } }, /not approved/],
    ['cannot-answer', {}, /cannot answer/],
  ];
  for (const [name, answers, text] of cases) {
    const target = join(root, `deploy-${name}`);
    const f = fakeContext({ resumed: { ...builtCopy() }, answers });
    const result = await runPipeline(
      { repository: built.repo, deploy_to: target, artifact: 'dist' },
      f.ctx,
      OPTIONS,
    );
    assert.equal(structured(result).status, 'not_approved', name);
    assert.equal(result.isError, true);
    assert.match(String(result.content[0]!.text), text);
    assert.equal(existsSync(target), false, `${name}: deployed without approval`);
  }
  // The first attempt (before) stopped at the question: it deployed nothing either.
  assert.equal(existsSync(join(root, 'unused')), false);
});

test('a repeated deploy of the same task is a no-op', async () => {
  const build = join(root, 'repeat-build');
  mkdirSync(build);
  writeFileSync(join(build, 'app.txt'), 'v1');
  const target = join(root, 'deploy-repeat');
  const first = await deploy(build, target, 'task/42');
  assert.deepEqual(first, { path: join(target, 'release-task_42'), created: true });
  writeFileSync(join(build, 'app.txt'), 'v2');
  const again = await deploy(build, target, 'task/42');
  assert.deepEqual(again, { path: first.path, created: false });
  assert.equal(readFileSync(join(first.path, 'app.txt'), 'utf8'), 'v1');
});

test('a failing step ends the run failed with its output; later steps do not run', async () => {
  const repo = fixtureRepo('failing', {
    ...PASSING,
    'test.js': "console.error('1 test failed: boom');\nprocess.exit(1);\n",
  });
  const f = fakeContext({ answers: APPROVED });
  const target = join(root, 'deploy-failing');
  const result = await runPipeline({ repository: repo, deploy_to: target, artifact: 'dist' }, f.ctx, OPTIONS);
  assert.deepEqual(structured(result), {
    status: 'failed',
    completed_steps: ['clone', 'install'],
    failed_step: 'test',
  });
  assert.match(String(result.content[0]!.text), /test exited 1:[^]*boom/);
  assert.deepEqual(started(f.events), ['clone', 'install', 'test']);
  assert.deepEqual(f.asked, []);
  assert.equal(existsSync(target), false);
});

test("a step's output is throttled: at most one message per interval, and its last line at its end", async () => {
  const chatty = "for (let i = 1; i <= 200; i++) console.log('line ' + i);\n";
  const repo = fixtureRepo('chatty', { ...PASSING, 'test.js': chatty });
  const f = fakeContext({ answers: APPROVED });
  const options = { ...OPTIONS, progressIntervalMs: 60_000 };
  const result = await runPipeline(
    { repository: repo, deploy_to: join(root, 'deploy-chatty'), artifact: 'dist' },
    f.ctx,
    options,
  );
  assert.equal(structured(result).status, 'deployed');
  assert.deepEqual(
    f.events.filter((e) => e.startsWith('progress test:')),
    ['progress test: started', 'progress test: line 200'],
  );
});

/** Alive and not a zombie (a zombie has exited; only its parent has not read its status yet). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
  return !/^\d+ \(.*\) Z/.test(stat);
}

test('cancel mid-step kills the whole process group, a grandchild that ignores SIGTERM too', async () => {
  // The test step starts a grandchild that ignores SIGTERM and holds no pipe of the step, then waits.
  const hang = [
    "const { spawn } = require('child_process');",
    "const child = spawn(process.execPath, ['-e', \"process.on('SIGTERM', () => {}); setInterval(() => {}, 1000)\"], { stdio: 'ignore' });",
    // Written whole, then renamed into place: the test polls for the file and must never read half of it.
    "require('fs').writeFileSync('../pids.json.tmp', JSON.stringify([process.pid, child.pid]));",
    "require('fs').renameSync('../pids.json.tmp', '../pids.json');",
    "console.log('waiting');",
    'setInterval(() => {}, 1000);',
  ].join('\n');
  const repo = fixtureRepo('hanging', { ...PASSING, 'test.js': hang });
  const f = fakeContext({ answers: APPROVED });
  const run = runPipeline(
    { repository: repo, deploy_to: join(root, 'deploy-hanging'), artifact: 'dist' },
    f.ctx,
    OPTIONS,
  );
  const pidsFile = async () => {
    for (let i = 0; i < 600; i++) {
      const workspace = f.checkpoints[0]?.workspace;
      if (workspace && existsSync(join(workspace, 'pids.json')))
        return JSON.parse(readFileSync(join(workspace, 'pids.json'), 'utf8')) as number[];
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('the test step never started');
  };
  const pids = await pidsFile();
  assert.ok(pids.every(alive), 'both processes run before the cancel');
  f.controller.abort('cancelled');
  try {
    // Bounded: a step whose group was not killed holds its output pipe open and never ends.
    const result = await Promise.race([
      run,
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error('the cancelled pipeline did not return')), 15_000).unref(),
      ),
    ]);
    assert.deepEqual(structured(result), {
      status: 'cancelled',
      completed_steps: ['clone', 'install'],
      failed_step: 'test',
    });
    for (const pid of pids)
      assert.equal(alive(pid), false, `pid ${pid} still alive after the cancel returned`);
  } finally {
    for (const pid of pids.filter(alive)) process.kill(pid, 'SIGKILL');
  }
  assert.deepEqual(f.asked, [], 'no question after a cancel');
});
