import { Redis, type Command } from 'ioredis';
import { scriptLabel } from './scripts.js';
import { redisUnavailableReason } from './unavailable.js';

/**
 * A connection for Taskline's commands. Commands issued while Redis is down fail fast instead of
 * queueing without bound, so callers can answer 503 and clients retry. Commands issued in the same
 * tick go out as one write (auto-pipelining): with `appendfsync always`, Redis then answers them
 * after one fsync instead of one each, and a busy process makes one syscall instead of dozens.
 */
export function connectRedis(url: string, name: string): Redis {
  return new Redis(url, {
    connectionName: name,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: true,
    enableAutoPipelining: true,
    retryStrategy: (times) => Math.min(50 * times, 1000),
  });
}

/** True for a failure that means "retry shortly" (see `redisUnavailableReason`): 503, not 500. */
export function isRedisUnavailable(err: unknown): boolean {
  return redisUnavailableReason(err) !== null;
}

/**
 * Times every command sent on `redis` (ioredis has no hook for it) from the send to its reply,
 * pipelined and MULTI commands included, each once even when ioredis resends it after a
 * reconnect. `command` is the lowercase command name, a Taskline script's `tl_<name>` for its
 * EVALSHA/EVAL: a bounded set. Failed commands are timed too; they are latency the caller saw.
 */
export function timeRedisCommands(redis: Redis, observe: (command: string, seconds: number) => void): void {
  const send = redis.sendCommand.bind(redis);
  const timed = new WeakSet<Command>();
  redis.sendCommand = (command: Command, stream?: Parameters<Redis['sendCommand']>[1]) => {
    if (!timed.has(command)) {
      timed.add(command);
      const started = process.hrtime.bigint();
      const done = () => observe(commandLabel(command), Number(process.hrtime.bigint() - started) / 1e9);
      command.promise.then(done, done);
    }
    return send(command, stream);
  };
}

function commandLabel(command: Command): string {
  if (command.name === 'evalsha' || command.name === 'eval')
    return scriptLabel(command.name, String(command.args[0])) ?? command.name;
  return command.name;
}
