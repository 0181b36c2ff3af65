// Service entries that serve the conformance suite's fixtures, for a test stack.
import type { StackOptions } from '@taskline/testing';

/**
 * The api and worker entries that serve the conformance suite's fixtures: the services as
 * deployed, with the fixtures passed in (production code has none). For a `@taskline/testing`
 * stack's `entries`; the api lists the fixture tools that the worker runs, so both go together.
 */
export const FIXTURE_ENTRIES: NonNullable<StackOptions['entries']> = {
  api: 'test/conformance/serve-api.ts',
  'gpu-worker': 'test/conformance/serve-worker.ts',
};

/**
 * The tool module of the conformance suite's durable task fixtures (and `worker_steps`), for a
 * tool-worker process (`TASKLINE_TOOL_MODULE`): the stack's tool worker serves these.
 */
export const FIXTURE_TOOL_MODULE = 'test/conformance/fixtures/worker-tools.ts';
