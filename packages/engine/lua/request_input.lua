--[[
  A running attempt asks its caller questions: `running` -> `input_required`, and the task is
  parked: the attempt lets it go (no lease, no worker slot) until the answers come in, when
  provide_input.lua queues it for a new attempt (which replays the answers). Keys are unique over
  the task's life: a key asked before keeps its first question (and any answer). Only this ask's
  keys (`input_keys`) are waited for: a question an earlier attempt asked and this one does not
  ask again is not.

  KEYS[1] task hash  KEYS[2] event stream  KEYS[3] channel  KEYS[4] inputs hash
  ARGV[1] now (ms)  ARGV[2] attempt  ARGV[3] input deadline (ms): the task fails after it unanswered
  ARGV[4] the asked keys as a JSON array
  ARGV[5] number of keys (N); ARGV[6 .. 5+2N] key, request JSON, ...
  ARGV[6+2N] event type  ARGV[7+2N] event data
  ARGV[8+2N] this call's nonce, kept in the record as `step`

  Safe to run twice: a call whose nonce is the record's `step` ran already (its reply was lost and
  the client sent it again) and is answered {'ok', ...} as it was, writing nothing.

  Inputs hash fields: `q:<key>` = request JSON, `a:<key>` = answer JSON.
  Returns {'ok', seq, kind, created_at} | {'answered'} when every key already has an answer (nothing to wait for)
        | {'missing'} | {'stale', status} | {'illegal', status}
        | {'corrupt', what} when a write would fail (nothing is written; see refuseUnwritable)
]]
local cur = redis.call('HMGET', KEYS[1], 'status', 'attempt', 'kind', 'created_at', 'parked', 'side_keys', 'seq',
  'step', 'hooks')
local n = tonumber(ARGV[5])
if cur[1] and cur[8] == ARGV[8 + 2 * n] then
  return { 'ok', tonumber(cur[7]), cur[3] or '', cur[4] or '' }
end
local refused = refuseUnlessRunning(cur[1], cur[2], ARGV[2], cur[5])
  or refuseUnwritable(KEYS[1], KEYS[2], { [KEYS[4]] = 'hash' })
if refused then
  return refused
end
local open = 0
for i = 6, 5 + 2 * n, 2 do
  redis.call('HSETNX', KEYS[4], 'q:' .. ARGV[i], ARGV[i + 1])
  if redis.call('HEXISTS', KEYS[4], 'a:' .. ARGV[i]) == 0 then
    open = open + 1
  end
end
local side = withSideKey(cur[6], 'i')
if open == 0 then
  if side then
    redis.call('HSET', KEYS[1], 'side_keys', side)
  end
  return { 'answered' }
end
local fields = { 'status', 'input_required', 'updated_at', tonumber(ARGV[1]), 'parked', '1',
  'input_deadline', tonumber(ARGV[3]), 'input_keys', ARGV[4], 'step', ARGV[8 + 2 * n] }
if side then
  fields[#fields + 1] = 'side_keys'
  fields[#fields + 1] = side
end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('HDEL', KEYS[1], 'lease_owner', 'lease_until')
local seq = emit(KEYS[1], KEYS[2], KEYS[3], ARGV[6 + 2 * n], ARGV[7 + 2 * n], cur[9])
return { 'ok', seq, cur[3] or '', cur[4] or '' }
