--[[
  A running attempt asks its caller questions: `running` -> `input_required`. Keys are unique over
  the task's life: a key asked before keeps its first question (and any answer).

  KEYS[1] task hash  KEYS[2] event stream  KEYS[3] channel  KEYS[4] inputs hash
  ARGV[1] now (ms)  ARGV[2] attempt
  ARGV[3] number of keys (N); ARGV[4 .. 3+2N] key, request JSON, ...
  ARGV[4+2N] event type  ARGV[5+2N] event data

  Inputs hash fields: `q:<key>` = request JSON, `a:<key>` = answer JSON.
  Returns {'ok', seq, kind, created_at} | {'answered'} when every key already has an answer (nothing to wait for)
        | {'missing'} | {'stale', status} | {'illegal', status}
        | {'corrupt', what} when a write would fail (nothing is written; see refuseUnwritable)
]]
local cur = redis.call('HMGET', KEYS[1], 'status', 'attempt', 'kind', 'created_at')
local refused = refuseUnlessRunning(cur[1], cur[2], ARGV[2])
  or refuseUnwritable(KEYS[1], KEYS[2], { [KEYS[4]] = 'hash' })
if refused then
  return refused
end
local n = tonumber(ARGV[3])
local open = 0
for i = 4, 3 + 2 * n, 2 do
  redis.call('HSETNX', KEYS[4], 'q:' .. ARGV[i], ARGV[i + 1])
  if redis.call('HEXISTS', KEYS[4], 'a:' .. ARGV[i]) == 0 then
    open = open + 1
  end
end
if open == 0 then
  return { 'answered' }
end
redis.call('HSET', KEYS[1], 'status', 'input_required', 'updated_at', tonumber(ARGV[1]))
local seq = emit(KEYS[1], KEYS[2], KEYS[3], ARGV[4 + 2 * n], ARGV[5 + 2 * n])
return { 'ok', seq, cur[3] or '', cur[4] or '' }
