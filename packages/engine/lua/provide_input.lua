--[[
  The caller answers input requests. Unknown keys and keys already answered are ignored; partial
  answers are kept. Once none of the current ask's keys (`input_keys`, set by request_input.lua;
  every asked key for a task asked before that field existed) is left open, the task goes on: a
  parked one (no attempt holds it) `input_required` -> `queued` for a new attempt, shown `running`
  (field `shown`, as after a restart: its clients see it running again at once, and the claim
  writes no status event), to be offered by the caller (another slot: enqueue.lua); one asked
  before parking existed, whose attempt still waits, -> `running`.

  KEYS[1] task hash  KEYS[2] event stream  KEYS[3] channel  KEYS[4] inputs hash
  ARGV[1] now (ms)
  ARGV[2] number of answers (N); ARGV[3 .. 2+2N] key, answer JSON, ...
  ARGV[3+2N] event type  ARGV[4+2N] event data for the return to `running`

  Returns {'ok', status, accepted, resumed, attempt, seq} (status: what clients see; resumed 1: a
  parked task answered and queued, to be offered in the queued state attempt:seq)
        | {'missing'} | {'terminal', status}
        | {'corrupt', what} when a write would fail (nothing is written; see refuseUnwritable)
]]
local cur = redis.call('HMGET', KEYS[1], 'status', 'input_keys', 'parked', 'attempt', 'hooks')
local status = cur[1]
if not status then
  return { 'missing' }
end
if isTerminal(status) then
  return { 'terminal', status }
end
local unwritable = refuseUnwritable(KEYS[1], KEYS[2], { [KEYS[4]] = 'hash' })
if unwritable then
  return unwritable
end
local n = tonumber(ARGV[2])
local accepted = 0
for i = 3, 2 + 2 * n, 2 do
  if redis.call('HEXISTS', KEYS[4], 'q:' .. ARGV[i]) == 1 and redis.call('HSETNX', KEYS[4], 'a:' .. ARGV[i], ARGV[i + 1]) == 1 then
    accepted = accepted + 1
  end
end
if status ~= 'input_required' then
  return { 'ok', status, accepted, 0 }
end
local keys = {}
if cur[2] then
  keys = cjson.decode(cur[2])
else
  for _, f in ipairs(redis.call('HKEYS', KEYS[4])) do
    if string.sub(f, 1, 2) == 'q:' then
      keys[#keys + 1] = string.sub(f, 3)
    end
  end
end
for _, k in ipairs(keys) do
  if redis.call('HEXISTS', KEYS[4], 'a:' .. k) == 0 then
    return { 'ok', status, accepted, 0 }
  end
end
redis.call('HDEL', KEYS[1], 'parked', 'input_deadline', 'input_keys')
if cur[3] then
  redis.call('HSET', KEYS[1], 'status', 'queued', 'shown', 'running', 'updated_at', tonumber(ARGV[1]))
else
  redis.call('HSET', KEYS[1], 'status', 'running', 'updated_at', tonumber(ARGV[1]))
end
local seq = emit(KEYS[1], KEYS[2], KEYS[3], ARGV[3 + 2 * n], ARGV[4 + 2 * n], cur[5])
if cur[3] then
  return { 'ok', 'running', accepted, 1, tonumber(cur[4] or '0'), seq }
end
return { 'ok', 'running', accepted, 0 }
