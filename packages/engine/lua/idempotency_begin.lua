--[[
  Reserve an Idempotency-Key for a create (LMSP 1.0 section 9.2), scoped by the key name to one tenant.
  The record names the task id chosen for the first request, so a retry after a crash anywhere in
  the create path finds that same task rather than making a second one.

  KEYS[1] idempotency record (hash)
  ARGV[1] now (ms)  ARGV[2] proposed task id  ARGV[3] request fingerprint
  ARGV[4] pending hold (ms): how long an unfinished create keeps the key to itself
  ARGV[5] record TTL (s)
  ARGV[6] '' or the id a `done` record named when last read, whose task the caller has since
          found gone (expired, evicted): such a key is free again, so the record is re-pointed to
          ARGV[2] as for a new key, but only while it is still `done` and names that id (compare
          and set: of two retries that saw the task gone, the second finds the first one's id).

  Returns {'new', taskId} | {'done', taskId} | {'pending', taskId} | {'takeover', taskId} | {'reused'}
]]
local rec = redis.call('HMGET', KEYS[1], 'task', 'fingerprint', 'state', 'since')
local now = tonumber(ARGV[1])
local function reserve()
  redis.call('HSET', KEYS[1], 'task', ARGV[2], 'fingerprint', ARGV[3], 'state', 'pending', 'since', now)
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
  return { 'new', ARGV[2] }
end
if not rec[1] then
  return reserve()
end
if rec[2] ~= ARGV[3] then
  return { 'reused' }
end
if rec[3] == 'done' and rec[1] == ARGV[6] then
  return reserve()
end
if rec[3] == 'done' then
  return { 'done', rec[1] }
end
if tonumber(rec[4]) + tonumber(ARGV[4]) > now then
  return { 'pending', rec[1] }
end
-- The first request stopped half-way: this one finishes it, under the same task id (unless that
-- task was written and has since expired: create.lua refuses the id, and the caller marks this
-- record done and comes back with the id known gone, as above).
redis.call('HSET', KEYS[1], 'since', now)
return { 'takeover', rec[1] }
