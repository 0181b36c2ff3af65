// `taskline keys`: operator commands on API keys through @taskline/auth.
import { ApiKeyStore, TENANT_PATTERN } from '@taskline/auth';
import { connectRedis, TasklineError } from '@taskline/engine';
import { TasklineClientError } from '@taskline/client';
import { HTTP_STATUS } from '@taskline/lmsp';
import { keysRedisUrl, UsageError, type CliConfig } from './config.js';
import { EXIT } from './exit.js';
import type { CliIo } from './io.js';

/**
 * Operator commands on API keys, through `@taskline/auth`'s ApiKeyStore (the same hashing and
 * layout the API reads): the secret is printed once and never stored.
 */
export async function runKeys(
  sub: string | undefined,
  rest: string[],
  values: { tenant?: string; name?: string; json?: boolean },
  config: CliConfig,
  io: CliIo,
): Promise<number> {
  const valid =
    (sub === 'create' && values.tenant !== undefined && rest.length === 0) ||
    (sub === 'list' && rest.length === 0) ||
    (sub === 'revoke' && rest.length === 1);
  if (!valid)
    throw new UsageError(
      'usage: taskline keys create --tenant <tenant> [--name <label>] | keys list [--tenant <tenant>] | keys revoke <key id>',
    );
  if (sub === 'revoke' && rest[0]!.trim() === '') throw new UsageError('A key id cannot be empty.');
  if (values.tenant !== undefined && !TENANT_PATTERN.test(values.tenant))
    throw new UsageError(
      `--tenant takes 1-64 letters, digits, ".", "_" or "-", not ${JSON.stringify(values.tenant)}.`,
    );
  // keys list prints one key a line: a line break in a name would break or forge lines.
  if (values.name !== undefined && /[\p{Cc}\p{Zl}\p{Zp}]/u.test(values.name))
    throw new UsageError('--name cannot hold line breaks or other control characters.');
  const redisUrl = keysRedisUrl(config);
  const redis = connectRedis(redisUrl, 'taskline-cli');
  // Fail fast with a clear message instead of retrying forever against a Redis that is not there.
  redis.options.maxRetriesPerRequest = 1;
  redis.options.retryStrategy = () => null;
  redis.on('error', () => undefined);
  const keys = new ApiKeyStore(redis);
  try {
    if (sub === 'create') {
      const created = await keys.create(values.tenant!, values.name ?? '');
      if (values.json) io.stdout.write(JSON.stringify(created) + '\n');
      else {
        io.stdout.write(created.key + '\n');
        io.stderr.write(
          `created ${created.id} for tenant ${created.tenant}; the key above is shown only once\n`,
        );
      }
      return EXIT.ok;
    }
    if (sub === 'list') {
      const list = await keys.list(values.tenant);
      if (values.json) io.stdout.write(JSON.stringify(list) + '\n');
      else
        for (const k of list)
          io.stdout.write(
            `${k.id}  ${k.tenant}  ${new Date(k.created_at * 1000).toISOString()}  ${k.name}\n`,
          );
      return EXIT.ok;
    }
    if (await keys.revoke(rest[0]!)) {
      if (values.json) io.stdout.write(JSON.stringify({ id: rest[0], revoked: true }) + '\n');
      else io.stdout.write(`revoked ${rest[0]}\n`);
      return EXIT.ok;
    }
    throw new TasklineClientError('key_not_found', `No API key ${rest[0]}.`);
  } catch (err) {
    if (err instanceof TasklineError)
      throw new TasklineClientError(err.code, err.message, HTTP_STATUS[err.code]);
    if (err instanceof TasklineClientError || err instanceof UsageError) throw err;
    throw new TasklineClientError(
      'network_error',
      `Cannot use Redis at ${redisUrl}: ${(err as Error).message}`,
    );
  } finally {
    redis.disconnect();
  }
}
