--[[
  A running tool attempt is about to hand out a callback URL (ctx.awaitCallback): the callback's
  key becomes a question of the task before the URL leaves the worker. A callback that arrives
  before the task parks is then kept (provide_input.lua stores an answer to a known key in any
  unended state), and the park that follows finds it answered instead of waiting. Fenced by
  attempt, as every worker write.

  KEYS[1] task hash  KEYS[2] event stream  KEYS[3] inputs hash
  ARGV[1] attempt  ARGV[2] the callback's key  ARGV[3] its request (JSON)

  Safe to run twice: the first request of a key is kept (HSETNX), and the reply is the same.

  Returns {'ok', answered} (answered 1: the callback arrived already, on this or an earlier attempt)
        | {'missing'} | {'stale', status} | {'illegal', status}
        | {'corrupt', what} when a write would fail (nothing is written; see refuseUnwritable)
]]
local cur = redis.call('HMGET', KEYS[1], 'status', 'attempt', 'parked', 'side_keys')
local refused = refuseUnlessRunning(cur[1], cur[2], ARGV[1], cur[3])
  or refuseUnwritable(KEYS[1], KEYS[2], { [KEYS[3]] = 'hash' })
if refused then
  return refused
end
redis.call('HSETNX', KEYS[3], 'q:' .. ARGV[2], ARGV[3])
-- The inputs hash expires with the task (expireTask reads `side_keys`).
local side = withSideKey(cur[4], 'i')
if side then
  redis.call('HSET', KEYS[1], 'side_keys', side)
end
return { 'ok', redis.call('HEXISTS', KEYS[3], 'a:' .. ARGV[2]) }
