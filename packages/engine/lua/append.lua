--[[
  Append output events of a running attempt (text deltas), fenced by attempt, together with the
  token ids they came from, so the snapshot for `resume` always matches the text already sent.

  KEYS[1] task hash  KEYS[2] event stream  KEYS[3] channel  KEYS[4] token snapshot (string)
  ARGV[1] now (ms)  ARGV[2] attempt  ARGV[3] this call's nonce, kept in the record as `step`
  ARGV[4] token ids to append, each followed by ',' ('' for none)
  ARGV[5 ..] event type, event data (JSON), ...

  Safe to run twice: a call whose nonce is the record's `step` ran already (its reply was lost and
  the client sent it again) and is answered {'ok', seq} without appending the same output again.

  Returns {'ok', seq} | {'missing'} | {'stale', status} | {'illegal', status}
        | {'corrupt', what} when a write would fail (nothing is written; see refuseUnwritable)
]]
local cur = redis.call('HMGET', KEYS[1], 'status', 'attempt', 'parked', 'seq', 'side_keys', 'step', 'hooks')
if cur[1] and cur[6] == ARGV[3] then
  return { 'ok', tonumber(cur[4]) }
end
local refused = refuseUnlessRunning(cur[1], cur[2], ARGV[2], cur[3])
  or refuseUnwritable(KEYS[1], KEYS[2], nil, { cur[4], cur[2] })
if refused then
  return refused
end
local side = nil
if ARGV[4] ~= '' then
  -- The first write: a snapshot key of another type fails it before anything is written, which
  -- spares every append a TYPE check (a command per tick of every generation).
  local appended = redis.pcall('APPEND', KEYS[4], ARGV[4])
  if type(appended) == 'table' and appended['err'] then
    return { 'corrupt', KEYS[4] .. ' is a ' .. redis.call('TYPE', KEYS[4])['ok'] .. ', not a string' }
  end
  side = withSideKey(cur[5], 't')
end
local events = argvEvents(5)
local base = tonumber(cur[4] or '0')
local fields = { 'updated_at', tonumber(ARGV[1]), 'seq', base + #events / 2, 'step', ARGV[3] }
if side then
  fields[7], fields[8] = 'side_keys', side
end
redis.call('HSET', KEYS[1], unpack(fields))
local seq = emitAfter(KEYS[2], KEYS[3], base, events, cur[7])
return { 'ok', seq }
