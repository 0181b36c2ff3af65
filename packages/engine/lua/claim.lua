--[[
  A worker takes a queued task: `queued` -> `loading`, a new attempt number and a lease.
  The attempt number fences every later write of this worker (see transition.lua, append.lua).
  A worker that has the model loaded already goes on to `running` in the same step (both events
  are written), which saves the separate start on the way to the first token.

  KEYS[1] task hash  KEYS[2] event stream  KEYS[3] channel
  ARGV[1] now (ms)  ARGV[2] worker id  ARGV[3] lease (ms)
  ARGV[4] event type  ARGV[5] event data (JSON)
  ARGV[6] event type, ARGV[7] event data (JSON) of `running`: optional, only to start at once

  A new attempt of a task its clients saw `running` (field `shown`, set by the restart that
  queued it) writes neither event: to them it never stopped running (ARCHITECTURE.md, "What
  clients see").

  Returns {'ok', attempt, seq} | {'missing'} | {'terminal', status} | {'illegal', status}
        | {'corrupt', what} when a write would fail (nothing is written; see refuseUnwritable)
]]
local task = KEYS[1]
local status, shown = unpack(redis.call('HMGET', task, 'status', 'shown'))
if not status then
  return { 'missing' }
end
if isTerminal(status) then
  return { 'terminal', status }
end
if status ~= 'queued' then
  return { 'illegal', status }
end
local unwritable = refuseUnwritable(task, KEYS[2])
if unwritable then
  return unwritable
end
local now = tonumber(ARGV[1])
local attempt = redis.call('HINCRBY', task, 'attempt', 1)
redis.call('HSET', task, 'status', 'loading', 'updated_at', now, 'lease_owner', ARGV[2], 'lease_until', now + tonumber(ARGV[3]))
local quiet = shown == 'running'
local seq = quiet and tonumber(redis.call('HGET', task, 'seq')) or emit(task, KEYS[2], KEYS[3], ARGV[4], ARGV[5])
if ARGV[6] then
  redis.call('HSET', task, 'status', 'running')
  if not quiet then
    seq = emit(task, KEYS[2], KEYS[3], ARGV[6], ARGV[7])
  end
end
return { 'ok', attempt, seq }
