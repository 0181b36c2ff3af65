/** A service that cannot start says why in one JSON line, as every other event, and exits 1. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { ROOT } from '@taskline/testing';

for (const kind of ['api', 'scheduler', 'gpu-worker']) {
  test(`${kind}: bad settings are one JSON error line on stderr and exit code 1, no stack trace`, () => {
    const run = spawnSync(process.execPath, [`services/${kind}/dist/main.js`], {
      cwd: ROOT,
      // A credential in the settings must not reach the line either (REDIS_URL's password).
      env: { ...process.env, TASKLINE_WORKER_FETCHERS: '0', REDIS_URL: 'redis://u:s3cret@127.0.0.1:1' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(run.status, 1, run.stderr);
    assert.equal(run.stdout, '');
    const lines = run.stderr.trimEnd().split('\n');
    assert.equal(lines.length, 1, run.stderr);
    const event = JSON.parse(lines[0]!) as {
      level: string;
      msg: string;
      service: string;
      error: { message: string };
    };
    assert.deepEqual([event.level, event.msg, event.service], ['error', 'start_failed', kind]);
    assert.match(event.error.message, /invalid configuration: TASKLINE_WORKER_FETCHERS/);
    assert.ok(!run.stderr.includes('s3cret'), "!run.stderr.includes('s3cret')");
  });
}
