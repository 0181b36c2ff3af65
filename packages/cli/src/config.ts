// The CLI's settings: flags over the environment over the config file over defaults.
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { DEFAULTS } from '@taskline/config';
import { DEFAULT_STATE_RETENTION_S } from './sqlite-store.js';

/** A usage or configuration mistake: exit code 2, with a message that says what to fix. */
export class UsageError extends Error {}

export interface CliConfig {
  /** The API's origin. */
  url: string;
  apiKey: string | undefined;
  /** The SQLite file holding the ids of the tasks this CLI created. */
  state: string;
  /** For `keys`: the Redis that holds the API keys. No default: a guess may be another Redis. */
  redisUrl: string | undefined;
  /** The JWT claim the server reads the tenant from (its TASKLINE_JWT_TENANT_CLAIM). */
  jwtTenantClaim: string;
  /** Seconds a finished task's entry stays in `state`. */
  stateRetentionS: number;
  /** Tries after the first for a request that may be tried again (unreachable, 429, 503); 0: fail at once. */
  retries: number;
}

/** As the client library tries a request: six times in all, about 8 s of backoff when unreachable. */
export const DEFAULT_RETRIES = 5;

/** As flags and the config file give them; `stateRetention` may be a JSON number in the file. */
type RawConfig = Partial<Omit<CliConfig, 'stateRetentionS' | 'retries'>> & {
  stateRetention?: string;
  retries?: string;
};

const FILE_KEYS = [
  'url',
  'apiKey',
  'state',
  'redisUrl',
  'jwtTenantClaim',
  'stateRetention',
  'retries',
] as const;
/** Config file keys that may be JSON numbers. */
const NUMBER_KEYS = new Set(['stateRetention', 'retries']);

export function defaultConfigPath(env: NodeJS.ProcessEnv): string {
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'taskline', 'config.json');
}

function readConfigFile(path: string, explicit: boolean): RawConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if (!explicit && (err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new UsageError(`Cannot read the config file ${path}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new UsageError(`The config file ${path} is not valid JSON.`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new UsageError(`The config file ${path} must hold a JSON object.`);
  const out: RawConfig = {};
  for (const [k, v] of Object.entries(parsed)) {
    if (!(FILE_KEYS as readonly string[]).includes(k))
      throw new UsageError(
        `The config file ${path} has an unknown key "${k}" (known: ${FILE_KEYS.join(', ')}).`,
      );
    if (NUMBER_KEYS.has(k) && typeof v === 'number') out[k as 'stateRetention' | 'retries'] = String(v);
    else if (typeof v !== 'string') throw new UsageError(`The config file ${path}: "${k}" must be a string.`);
    else out[k as (typeof FILE_KEYS)[number]] = v;
  }
  return out;
}

/** Flags win over the environment, which wins over the config file, which wins over defaults. */
export function resolveConfig(flags: RawConfig & { config?: string }, env: NodeJS.ProcessEnv): CliConfig {
  // An empty variable counts as unset, as shells and CI systems often leave them.
  const fromEnv = (name: string) => env[name] || undefined;
  const explicitPath = flags.config ?? fromEnv('TASKLINE_CONFIG');
  const file = readConfigFile(explicitPath ?? defaultConfigPath(env), explicitPath !== undefined);
  const stateHome = env.XDG_STATE_HOME || join(homedir(), '.local', 'state');
  const config: CliConfig = {
    url: flags.url ?? fromEnv('TASKLINE_URL') ?? file.url ?? 'http://127.0.0.1:8080',
    apiKey: flags.apiKey ?? fromEnv('TASKLINE_API_KEY') ?? file.apiKey,
    state: flags.state ?? fromEnv('TASKLINE_STATE') ?? file.state ?? join(stateHome, 'taskline', 'tasks.db'),
    redisUrl: flags.redisUrl ?? fromEnv('REDIS_URL') ?? file.redisUrl,
    jwtTenantClaim:
      flags.jwtTenantClaim ??
      fromEnv('TASKLINE_JWT_TENANT_CLAIM') ??
      file.jwtTenantClaim ??
      DEFAULTS.TASKLINE_JWT_TENANT_CLAIM,
    stateRetentionS: seconds(
      flags.stateRetention ?? fromEnv('TASKLINE_STATE_RETENTION_S') ?? file.stateRetention,
    ),
    retries: retries(flags.retries ?? fromEnv('TASKLINE_RETRIES') ?? file.retries),
  };
  // Sent in the Authorization header: a character no header can carry failed every request as
  // "server unreachable". The key is a secret, so the message does not repeat it.
  if (config.apiKey !== undefined && /[^\x21-\x7e\xa1-\xff]/.test(config.apiKey))
    throw new UsageError(
      '--api-key (TASKLINE_API_KEY, config "apiKey") holds a space, a control character or a character no HTTP header can carry.',
    );
  let url: URL;
  try {
    url = new URL(config.url);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error();
  } catch {
    throw new UsageError(`--url must be an http(s) URL, not "${config.url}".`);
  }
  // fetch refuses such a URL, and its message (printed as "cannot reach") repeats the password.
  if (url.username || url.password)
    throw new UsageError(
      '--url (TASKLINE_URL, config "url") must not hold a user name or password; the credential goes in --api-key.',
    );
  return config;
}

/** The state retention: whole seconds, 0 included; unset, the server's retention of ended tasks. */
function seconds(value: string | undefined): number {
  if (value === undefined) return DEFAULT_STATE_RETENTION_S;
  if (!/^[0-9]+$/.test(value))
    throw new UsageError(
      `--state-retention (TASKLINE_STATE_RETENTION_S, config "stateRetention") takes whole seconds, not ${JSON.stringify(value)}.`,
    );
  return Number(value);
}

/** The retries: a whole number, 0 included. */
function retries(value: string | undefined): number {
  if (value === undefined) return DEFAULT_RETRIES;
  if (!/^[0-9]+$/.test(value))
    throw new UsageError(
      `--retries (TASKLINE_RETRIES, config "retries") takes a whole number, not ${JSON.stringify(value)}.`,
    );
  return Number(value);
}

/**
 * The Redis URL of `keys`, checked before any connection: ioredis throws a bare "Invalid URL", and
 * a default would write keys into whatever Redis listens on 6379, not the one the API reads.
 */
export function keysRedisUrl(config: CliConfig): string {
  const url = config.redisUrl;
  if (url === undefined)
    throw new UsageError(
      'keys needs the Redis that holds the API keys: set REDIS_URL, --redis-url or "redisUrl" in the config file.',
    );
  let valid = false;
  try {
    valid = /^(redis|rediss|redis-cluster|rediss-cluster):$/.test(new URL(url).protocol);
  } catch {
    // not a URL at all
  }
  if (!valid)
    throw new UsageError(
      `--redis-url (REDIS_URL) must be a redis://, rediss://, redis-cluster:// or rediss-cluster:// URL, not ${JSON.stringify(url)}.`,
    );
  return url;
}
