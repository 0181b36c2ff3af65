/**
 * examples/ci-pipeline end to end: its built module served by a real tool-worker process, called
 * through the real api and scheduler by an official MCP SDK v1 client (MCP 2025-11-25 tasks). A
 * SIGKILL of the worker mid-pipeline resumes without running completed steps again, the approval
 * question is answered through the task (elicitation relayed on `tasks/result`) and deploys, and
 * a cancel mid-step leaves no process of the step alive.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { EngineStack } from '@taskline/test-support/engine-stack';
import type { Replica } from '@taskline/test-support/mcp-stack';
import { until } from '@taskline/testing';
import { KEY_A, startOneApiToolStack, v1Client } from './helpers.js';

const MODULE = 'examples/ci-pipeline/dist/index.js';

/** Whether `pid` still runs: a zombie (exited, not reaped yet) counts as gone. */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/**
 * A local npm project in git whose install, test and build append their name to `marker` (the
 * per-step side effect the test counts); `files` adds or replaces files (the build's own script).
 */
function fixtureRepo(root: string, name: string, marker: string, files: Record<string, string>): string {
  const dir = join(root, name);
  mkdirSync(dir);
  const mark = (step: string) => `node mark.js ${step}`;
  const pkg = {
    name,
    version: '1.0.0',
    private: true,
    scripts: {
      postinstall: mark('install'),
      test: `${mark('test')} && node test.js`,
      build: `${mark('build')} && node build.js`,
    },
  };
  writeFileSync(join(dir, 'package.json'), JSON.stringify(pkg));
  // No dependencies: `npm ci` runs offline.
  const lock = { name, version: '1.0.0', lockfileVersion: 3, requires: true, packages: { '': pkg } };
  writeFileSync(join(dir, 'package-lock.json'), JSON.stringify(lock));
  const all = {
    'mark.js': `require('fs').appendFileSync(${JSON.stringify(marker)}, process.argv[2] + '\\n');\n`,
    'test.js': "console.log('3 tests passed');\n",
    'build.js':
      "const fs = require('fs');\nfs.mkdirSync('dist', { recursive: true });\nfs.writeFileSync('dist/app.txt', 'built');\n",
    ...files,
  };
  for (const [file, text] of Object.entries(all)) writeFileSync(join(dir, file), text);
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, stdio: 'pipe' });
  git('init', '--quiet');
  git('add', '.');
  git('-c', 'user.name=test', '-c', 'user.email=test@example.com', 'commit', '--quiet', '-m', 'fixture');
  return dir;
}

/** How many times each step left its mark. */
function marks(marker: string): Record<string, number> {
  const counts: Record<string, number> = {};
  if (!existsSync(marker)) return counts;
  for (const step of readFileSync(marker, 'utf8').split('\n').filter(Boolean))
    counts[step] = (counts[step] ?? 0) + 1;
  return counts;
}

/** An official SDK v1 client of tenant A that answers elicitations with `onElicit`. */
async function elicitingClient(url: string, onElicit: () => Promise<unknown>): Promise<Client> {
  const client = await v1Client(url, KEY_A, { elicitation: {}, tasks: { list: {}, cancel: {} } });
  // Nothing asks before the call below, so the handler set after the connect is in time.
  client.setRequestHandler(ElicitRequestSchema, onElicit as never);
  // As hosts do: the listing tells `callToolStream` that run_ci_pipeline runs as a task.
  await client.listTools();
  return client;
}

describe('examples/ci-pipeline on a real tool worker, called by an MCP SDK v1 client', () => {
  let cluster: EngineStack;
  let api: Replica;
  let root: string;
  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'ci-pipeline-e2e-'));
    ({ cluster, api } = await startOneApiToolStack());
  });
  after(async () => {
    await cluster.stop();
    rmSync(root, { recursive: true, force: true });
  });

  const worker = async () => {
    const w = cluster.stack.toolWorker(MODULE, { TASKLINE_SCHEDULER_ADDR: cluster.schedulerAddr });
    await w.up;
    return w;
  };

  it('a SIGKILL mid-build resumes after the last checkpoint; the approval answered deploys', async () => {
    const marker = join(root, 'resume.marks');
    // The build takes seconds, so the worker dies in it (after clone, install and test were
    // checkpointed) once the build script has left its mark.
    const repository = fixtureRepo(root, 'resume', marker, {
      'build.js':
        "const fs = require('fs');\nsetTimeout(() => {\n  fs.mkdirSync('dist', { recursive: true });\n  fs.writeFileSync('dist/app.txt', 'built');\n}, 6000);\n",
    });
    const deployTo = join(root, 'releases');
    const first = await worker();
    let asked: { message?: string } | undefined;
    const client = await elicitingClient(api.url, async (req?: unknown) => {
      asked = (req as { params: { message?: string } }).params;
      return { action: 'accept', content: { approve: true } };
    });
    const seen: { type: string; task?: { taskId: string }; result?: Record<string, unknown> }[] = [];
    const stream = (async () => {
      for await (const m of client.experimental.tasks.callToolStream(
        { name: 'run_ci_pipeline', arguments: { repository, deploy_to: deployTo } },
        CallToolResultSchema,
        { timeout: 120_000 },
      ))
        seen.push(m as never);
    })();
    const id = await until('the task is created', async () => seen.find((m) => m.task)?.task?.taskId);
    // The build's own mark, not the "build:" status: that status is set before npm has started the
    // script, and a kill between the two left one build run on CI.
    await cluster.waitFor(id, 'the build is reported', (t) => /^build: /.test(t.statusMessage ?? ''), 60_000);
    await until('the build script runs', async () => marks(marker).build === 1 || undefined, 30_000);
    await first.kill('SIGKILL');
    const second = await worker();
    try {
      await stream;
      const result = seen.find((m) => m.type === 'result')?.result;
      assert.ok(result, JSON.stringify(seen));
      assert.equal(result.isError, false, JSON.stringify(result));
      const out = result.structuredContent as { status: string; completed_steps: string[]; release: string };
      assert.equal(out.status, 'deployed');
      assert.deepEqual(out.completed_steps, ['clone', 'install', 'test', 'build']);
      assert.equal(readFileSync(join(out.release, 'app.txt'), 'utf8'), 'built');
      assert.match(asked?.message ?? '', /Deploy its dist/);
      // Clone, install and test ran once; only the step the crash interrupted ran again.
      assert.deepEqual(marks(marker), { install: 1, test: 1, build: 2 });
      const clones = (await cluster.events(id)).filter((e) => e.status_message === 'clone: started');
      assert.equal(clones.length, 1);
      const reasons = (await cluster.events(id)).map((e) => e.reason).filter((r) => r !== undefined);
      assert.ok(reasons.includes('worker_lost'), JSON.stringify(reasons));
    } finally {
      await client.close();
      await second.kill('SIGTERM');
    }
  });

  it('a cancel mid-step leaves no process of the step alive', async () => {
    const marker = join(root, 'cancel.marks');
    const pids = join(root, 'cancel.pids');
    // npm starts a shell, which starts this script, which starts a grandchild: each records its pid.
    const repository = fixtureRepo(root, 'cancel', marker, {
      'test.js':
        "const fs = require('fs');\nconst { spawn } = require('child_process');\n" +
        "const child = spawn('sleep', ['600'], { stdio: 'ignore' });\n" +
        `fs.writeFileSync(${JSON.stringify(pids)}, [process.ppid, process.pid, child.pid].join('\\n'));\n` +
        'setInterval(() => {}, 1000);\n',
    });
    const w = await worker();
    const client = await elicitingClient(api.url, async () => ({ action: 'decline' }));
    try {
      const created = (await client.request(
        {
          method: 'tools/call',
          params: {
            name: 'run_ci_pipeline',
            arguments: { repository, deploy_to: join(root, 'never') },
            task: { ttl: 60_000 },
          },
        },
        (await import('@modelcontextprotocol/sdk/types.js')).CreateTaskResultSchema,
      )) as { task: { taskId: string } };
      const id = created.task.taskId;
      const group = await until('the test step recorded its pids', async () =>
        existsSync(pids) && readFileSync(pids, 'utf8').split('\n').length === 3
          ? readFileSync(pids, 'utf8').split('\n').map(Number)
          : undefined,
      );
      assert.ok(group.every(alive), 'the step runs');
      await client.experimental.tasks.cancelTask(id);
      const task = await cluster.waitForEnd(id, 30_000);
      assert.equal(task.status, 'cancelled');
      // The tool returns only once its group is gone: by its end, every pid is.
      assert.deepEqual(group.filter(alive), [], `alive after the cancel: ${group.filter(alive).join(', ')}`);
      assert.deepEqual(marks(marker), { install: 1, test: 1 });
    } finally {
      await client.close();
      await w.kill('SIGTERM');
    }
  });
});
