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
