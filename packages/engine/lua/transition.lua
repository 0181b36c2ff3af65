--[[
  Move a task from one of the allowed states to `to`, with its events, atomically.
  First commit wins: a task that already left the allowed states is refused, never overwritten;
  a terminal task is refused whatever the caller allows.

  KEYS[1] task hash  KEYS[2] event stream  KEYS[3] channel  KEYS[4] inputs hash  KEYS[5] token snapshot
  ARGV[1] now (ms)
  ARGV[2] to (target status)
  ARGV[3] allowed source statuses, comma separated (from the TypeScript state table)
  ARGV[4] attempt fence: '' for none, else the caller's attempt, which must be the current one
          and still held: a task back in `queued`, or parked (waiting for input), belongs to no
          attempt until the next claim
  ARGV[5] lease check: '' for none, else the lease must have lapsed by Redis's clock plus this many
          ms (recovery: 0; tests look ahead). Never a caller's clock: see serverMs
  ARGV[6] task retention (ms), applied when `to` is terminal
  ARGV[7] event retention (ms), likewise
  ARGV[8] 1 if `to` is terminal, else 0
  ARGV[9] 1 to drop the token snapshot in the same step (a `retry` starts from scratch), else 0
  ARGV[10] number of field/value pairs that follow (N); ARGV[11 .. 10+2N] field, value, ...
          A field `step` is the caller's nonce for this call (a worker's, see below).
  ARGV[11+2N ..] event type, event data (JSON), ...

  Returns {'ok', status, seq, kind, created_at} | {'missing'} | {'terminal', status} | {'illegal', status}
        | {'stale', status, attempt} | {'lease_held', status}
        | {'corrupt', what} when a write would fail (nothing is written; see refuseUnwritable)

  Safe to run twice: a call with a field `step` equal to the record's ran already (its reply was
  lost and the client sent it again) and is answered {'ok', ...} as it was, writing nothing.
]]
local task = KEYS[1]
-- kind and created_at go back to the caller for its metrics (transitions by kind, end-to-end time).
local cur = redis.call('HMGET', task, 'status', 'attempt', 'lease_until', 'kind', 'created_at', 'parked', 'seq',
  'side_keys', 'step', 'hooks')
local status, attempt, leaseUntil = cur[1], cur[2], cur[3]
if not status then
  return { 'missing' }
end
for i = 11, 10 + 2 * tonumber(ARGV[10]), 2 do
  if ARGV[i] == 'step' and ARGV[i + 1] == cur[9] then
    return { 'ok', status, tonumber(cur[7]), cur[4] or '', cur[5] or '' }
  end
end
if ARGV[4] ~= '' and (ARGV[4] ~= attempt or status == 'queued' or cur[6]) then
  return { 'stale', status, attempt }
end
if isTerminal(status) then
  return { 'terminal', status }
end
local allowed = false
for s in string.gmatch(ARGV[3], '[^,]+') do
  if s == status then
    allowed = true
  end
end
if not allowed then
  return { 'illegal', status }
end
if ARGV[5] ~= '' and tonumber(leaseUntil or '0') >= serverMs() + tonumber(ARGV[5]) then
  return { 'lease_held', status }
end
local unwritable = refuseUnwritable(task, KEYS[2], nil, { cur[7], attempt })
if unwritable then
  return unwritable
end
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[10])
local events = argvEvents(11 + 2 * n)
local base = tonumber(cur[7] or '0')
-- One write of the record: state, fields, event counter and, on a terminal state, its end stamps.
local fields = { 'status', ARGV[2], 'updated_at', now, 'seq', base + #events / 2 }
if ARGV[8] == '1' then
  for _, v in ipairs({ 'ended_at', now, 'expires_at', now + tonumber(ARGV[6]) }) do
    fields[#fields + 1] = v
  end
end
for i = 11, 10 + 2 * n do
  fields[#fields + 1] = ARGV[i]
end
redis.call('HSET', task, unpack(fields))
if ARGV[2] == 'queued' or ARGV[8] == '1' then
  -- Nobody works on a queued or finished task: drop the lease so no one renews it.
  redis.call('HDEL', task, 'lease_owner', 'lease_until')
end
if ARGV[9] == '1' then
  redis.call('DEL', KEYS[5])
end
local seq = emitAfter(KEYS[2], KEYS[3], base, events, cur[10])
if ARGV[8] == '1' then
  expireTask({ task, KEYS[2], KEYS[4], KEYS[5] }, now, tonumber(ARGV[6]), tonumber(ARGV[7]), true, cur[8])
end
return { 'ok', ARGV[2], seq, cur[4] or '', cur[5] or '' }
