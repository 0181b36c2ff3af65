/**
 * Operator commands: `keys create --tenant <t> [--name <n>]`, `keys list [--tenant <t>]`,
 * `keys revoke <key id>`, and `openapi` (prints the OpenAPI document). Reads REDIS_URL.
 */
import { parseArgs } from 'node:util';
import { ApiKeyStore } from '@taskline/auth';
import { loadEnv } from '@taskline/config';
import { connectRedis, redisTargetFromEnv } from '@taskline/engine';
import { buildOpenApi } from './lmsp/openapi.js';

const USAGE = `usage:
  keys create --tenant <tenant> [--name <label>]   prints the new key once
  keys list [--tenant <tenant>]
  keys revoke <key id>
  openapi                                          prints the OpenAPI 3.1 document`;

async function keys(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { tenant: { type: 'string' }, name: { type: 'string' } },
  });
  const [command, ...rest] = positionals;
  const redis = connectRedis(redisTargetFromEnv(loadEnv()), 'taskline-cli');
  // Failures surface as the command's own error; no event spam on stderr.
  redis.on('error', () => undefined);
  const store = new ApiKeyStore(redis);
  try {
    if (command === 'create' && values.tenant) {
      const created = await store.create(values.tenant, values.name ?? '');
      process.stdout.write(JSON.stringify(created) + '\n');
      return 0;
    }
    if (command === 'list') {
      for (const key of await store.list(values.tenant)) process.stdout.write(JSON.stringify(key) + '\n');
      return 0;
    }
    if (command === 'revoke' && rest.length === 1) {
      if (await store.revoke(rest[0]!)) return 0;
      process.stderr.write(`no key ${rest[0]}\n`);
      return 1;
    }
    process.stderr.write(USAGE + '\n');
    return 2;
  } finally {
    redis.disconnect();
  }
}

async function main(argv: string[]): Promise<number> {
  const [group, ...rest] = argv;
  if (group === 'keys') return keys(rest);
  if (group === 'openapi') {
    process.stdout.write(JSON.stringify(buildOpenApi(), null, 2) + '\n');
    return 0;
  }
  process.stderr.write(USAGE + '\n');
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
