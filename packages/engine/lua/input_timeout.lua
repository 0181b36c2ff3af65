--[[
  A parked task whose caller never answered fails at its input deadline: `input_required` ->
  `failed`, with the error given, in one step. First commit wins: an answer that landed first (the
  task is `running` again) or a later ask (a new deadline) leaves it alone.

  KEYS[1] task hash  KEYS[2] event stream  KEYS[3] channel  KEYS[4] inputs hash  KEYS[5] token snapshot
  ARGV[1] now (ms)  ARGV[2] task retention (ms)  ARGV[3] event retention (ms)
  ARGV[4] error (JSON)  ARGV[5] result (JSON)
  ARGV[6] event type  ARGV[7] event data of the final event

  Returns {'ok', kind, created_at} | {'missing'} | {'skipped', status}
        | {'corrupt', what} when a write would fail (nothing is written; see refuseUnwritable)
]]
local cur = redis.call('HMGET', KEYS[1], 'status', 'parked', 'input_deadline', 'kind', 'created_at', 'side_keys',
  'hooks')
local status = cur[1]
if not status then
  return { 'missing' }
end
local now = tonumber(ARGV[1])
if status ~= 'input_required' or not cur[2] or tonumber(cur[3] or now + 1) > now then
  return { 'skipped', status }
end
local unwritable = refuseUnwritable(KEYS[1], KEYS[2])
if unwritable then
  return unwritable
end
redis.call('HSET', KEYS[1], 'status', 'failed', 'updated_at', now, 'error', ARGV[4], 'result', ARGV[5])
redis.call('HDEL', KEYS[1], 'parked', 'input_deadline', 'input_keys')
emit(KEYS[1], KEYS[2], KEYS[3], ARGV[6], ARGV[7], cur[7])
expireTask({ KEYS[1], KEYS[2], KEYS[4], KEYS[5] }, now, tonumber(ARGV[2]), tonumber(ARGV[3]), false, cur[6])
return { 'ok', cur[4] or '', cur[5] or '' }
