--[[
  Extend a worker's lease, fenced by attempt. The answer tells the worker the current status, so a
  worker that was paused past its lease learns it lost the task instead of writing over it.

  KEYS[1] task hash
  ARGV[1] attempt  ARGV[2] lease (ms; its deadline is stamped by Redis's clock, see serverMs)

  Returns {'ok', status, deadline (ms, Redis's clock)} | {'missing'} | {'stale', status} | {'terminal', status}
]]
local cur = redis.call('HMGET', KEYS[1], 'status', 'attempt', 'parked')
local status, attempt = cur[1], cur[2]
if not status then
  return { 'missing' }
end
if isTerminal(status) then
  return { 'terminal', status }
end
-- A parked task (waiting for input) has no lease to extend: the attempt that asked let it go.
if attempt ~= ARGV[1] or status == 'queued' or cur[3] then
  return { 'stale', status }
end
local deadline = serverMs() + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'lease_until', deadline)
return { 'ok', status, deadline }
