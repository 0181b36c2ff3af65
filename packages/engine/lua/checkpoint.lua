--[[
  Store a running tool attempt's checkpoint, fenced by attempt: one slot per task, each write
  replacing the last. The next attempt of a `resume` task is handed it (see checkpoint.ts).

  KEYS[1] task hash
  ARGV[1] now (ms)  ARGV[2] attempt  ARGV[3] the checkpoint (JSON)

  Writing the same value twice leaves the same record, so a call re-sent after a lost reply is safe.

  Returns {'ok'} | {'missing'} | {'stale', status} | {'illegal', status}
]]
local cur = redis.call('HMGET', KEYS[1], 'status', 'attempt', 'parked')
local refused = refuseUnlessRunning(cur[1], cur[2], ARGV[2], cur[3])
if refused then
  return refused
end
redis.call('HSET', KEYS[1], 'checkpoint', ARGV[3], 'updated_at', tonumber(ARGV[1]))
return { 'ok' }
