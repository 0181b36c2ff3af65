// ApiService: api processes of test files that run side by side share no fixed port.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiService, freePort, startRedis } from '../src/index.js';

test('two api processes started without a metrics port both come up, each on a metrics port of its own', async () => {
  const redis = await startRedis();
  const env = { REDIS_URL: redis.url, TASKLINE_API_KEYS: 'tenant-a:key-a-0123456789' };
  // Built, as the api tests start it: tsx would add seconds to each start.
  const apis = [new ApiService(await freePort(), { env }), new ApiService(await freePort(), { env })];
  try {
    for (const api of apis) await api.start();
    assert.notEqual(apis[0]!.metricsBase, apis[1]!.metricsBase);
    for (const api of apis) assert.equal((await fetch(`${api.metricsBase}/metrics`)).status, 200);
  } finally {
    for (const api of apis) await api.stop();
    await redis.stop();
  }
});
