// The pipeline itself: its steps, resuming from a checkpoint, the approval question and the deploy.
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ToolContext, ToolResult } from '@taskline/tool-sdk';
import { deploy } from './deploy.js';
import { runStep, type Step, type StepOutcome } from './process-group.js';
import type { PipelineArgs, PipelineOutput } from './schema.js';

export interface PipelineOptions {
  /** How long a cancelled step's processes get between SIGTERM and SIGKILL. */
  killGraceMs: number;
  /** At most one progress message per this long while a step writes output. */
  progressIntervalMs: number;
}

export const DEFAULT_OPTIONS: PipelineOptions = { killGraceMs: 10_000, progressIntervalMs: 1_000 };

/** What each checkpoint stores: the next attempt of a `resume` tool reads it as `ctx.resumed`. */
export interface Checkpoint {
  workspace: string;
  completed: string[];
}

/** The steps, in order. Each runs in the workspace's `cwd` folder; `clean` is removed before it. */
export function pipelineSteps(repository: string): (Step & { clean?: string })[] {
  return [
    // `--` ends git's options: a repository named like `--upload-pack=...` stays a repository.
    {
      name: 'clone',
      command: 'git',
      args: ['clone', '--quiet', '--', repository, 'src'],
      cwd: '.',
      clean: 'src',
    },
    { name: 'install', command: 'npm', args: ['ci', '--no-audit', '--no-fund'], cwd: 'src' },
    { name: 'test', command: 'npm', args: ['test'], cwd: 'src' },
    { name: 'build', command: 'npm', args: ['run', 'build'], cwd: 'src' },
  ];
}

/**
 * Runs the steps not completed yet, checkpointing after each, then asks for approval and deploys.
 * Cancelled (or the lease lost, or a drain's deadline passed), it kills the running step's whole
 * process group and returns, keeping the workspace for a resumed attempt.
 */
export async function runPipeline(
  args: PipelineArgs,
  ctx: ToolContext,
  options: PipelineOptions = DEFAULT_OPTIONS,
): Promise<ToolResult> {
  const state = await startingPoint(ctx);
  const steps = pipelineSteps(args.repository);
  const total = steps.length + 1;
  for (const [index, step] of steps.entries()) {
    if (state.completed.includes(step.name)) continue;
    if (ctx.signal.aborted) return result('cancelled', state, {});
    const outcome = await runReported(step, index, total, state.workspace, ctx, options);
    if (ctx.signal.aborted) return result('cancelled', state, { failed_step: step.name });
    if (outcome.code !== 0) {
      await rm(state.workspace, { recursive: true, force: true });
      return result('failed', state, { failed_step: step.name }, failure(step, outcome));
    }
    state.completed.push(step.name);
    await ctx.checkpoint({ workspace: state.workspace, completed: state.completed });
  }
  await ctx.progress('waiting for approval to deploy', { progress: steps.length, total });
  const approved = await askApproval(args, ctx);
  if (approved !== true) {
    await rm(state.workspace, { recursive: true, force: true });
    return result('not_approved', state, {}, notApproved(approved));
  }
  const release = await deploy(
    join(state.workspace, 'src', args.artifact),
    args.deploy_to,
    ctx.idempotencyKey,
  );
  await ctx.progress(release.created ? 'deployed' : 'already deployed', { progress: total, total });
  await rm(state.workspace, { recursive: true, force: true });
  return result('deployed', state, { release: release.path });
}

/**
 * Where this attempt starts: the checkpoint's workspace with its completed steps, or a new empty
 * workspace. A checkpoint whose workspace is gone (the attempt runs on another worker, or its
 * temporary folder was cleaned) counts for nothing: the completed steps' outputs were in it, so
 * they run again in a new one.
 */
async function startingPoint(ctx: ToolContext): Promise<Checkpoint> {
  const saved = asCheckpoint(ctx.resumed);
  if (saved && (await exists(saved.workspace))) {
    ctx.log.info('pipeline_resumed', { workspace: saved.workspace, completed: saved.completed });
    return { workspace: saved.workspace, completed: [...saved.completed] };
  }
  if (saved) ctx.log.warn('pipeline_workspace_gone', { workspace: saved.workspace });
  return { workspace: await mkdtemp(join(tmpdir(), 'ci-pipeline-')), completed: [] };
}

function asCheckpoint(value: unknown): Checkpoint | undefined {
  const c = value as Partial<Checkpoint> | undefined;
  return typeof c?.workspace === 'string' && Array.isArray(c.completed) ? (c as Checkpoint) : undefined;
}

/** Runs one step with its output streamed as progress, at most once per interval. */
async function runReported(
  step: Step & { clean?: string },
  index: number,
  total: number,
  workspace: string,
  ctx: ToolContext,
  options: PipelineOptions,
): Promise<StepOutcome> {
  // A step interrupted halfway (a crash mid-clone) starts again from nothing.
  if (step.clean) await rm(join(workspace, step.clean), { recursive: true, force: true });
  let last = 0;
  let pending: string | undefined;
  const send = (message: string) => {
    last = Date.now();
    pending = undefined;
    // Progress is best effort: a lost message must not fail the step.
    ctx.progress(message, { progress: index, total }).catch((err: unknown) => {
      ctx.log.warn('progress_failed', { error: String(err) });
    });
  };
  send(`${step.name}: started`);
  const outcome = await runStep(step, workspace, {
    signal: ctx.signal,
    killGraceMs: options.killGraceMs,
    onLine(line) {
      if (!line.trim()) return;
      if (Date.now() - last >= options.progressIntervalMs) send(`${step.name}: ${line}`);
      else pending = `${step.name}: ${line}`;
    },
  });
  if (pending !== undefined) send(pending);
  return outcome;
}

/**
 * Asks the caller to approve the deploy (a yes/no form). The first time, `ask` ends this attempt
 * (it throws: let it go); once answered, the next attempt resumes from the last checkpoint, skips
 * every step, and `ask` returns the answer. Undefined: the caller cannot answer forms.
 */
async function askApproval(args: PipelineArgs, ctx: ToolContext): Promise<boolean | undefined> {
  const { approve_deploy } = await ctx.ask({
    approve_deploy: {
      method: 'elicitation/create',
      params: {
        mode: 'form',
        message: `The pipeline of ${args.repository} passed. Deploy its ${args.artifact} to ${args.deploy_to}?`,
        requestedSchema: {
          type: 'object',
          properties: { approve: { type: 'boolean', title: 'Deploy', description: 'Yes to deploy.' } },
          required: ['approve'],
        },
      },
    },
  });
  if (approve_deploy === undefined) return undefined;
  const answer = approve_deploy as { action?: string; content?: { approve?: unknown } };
  return answer.action === 'accept' && answer.content?.approve === true;
}

function result(
  status: PipelineOutput['status'],
  state: Checkpoint,
  extra: Partial<PipelineOutput>,
  text = `${status}: ${state.completed.join(', ') || 'no step'} completed`,
): ToolResult {
  const structuredContent: PipelineOutput = { status, completed_steps: state.completed, ...extra };
  return { content: [{ type: 'text', text }], structuredContent, isError: status !== 'deployed' };
}

function failure(step: Step, outcome: StepOutcome): string {
  const how = outcome.code === null ? `was killed (${outcome.signal})` : `exited ${outcome.code}`;
  return [`${step.name} ${how}:`, ...outcome.tail].join('\n');
}

function notApproved(answer: false | undefined): string {
  return answer === undefined
    ? 'Built, not deployed: the caller cannot answer the approval form (no elicitation capability).'
    : 'Built, not deployed: the deploy was not approved.';
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
