--[[
  Offer a queued task to the scheduler, atomically: into its model's ready index for its tenant
  (scored by creation, kept at the first offer), its tenant and model into the dispatch sets, out
  of the tenant's running set (a task waiting for dispatch is not running), its queued state
  recorded for dispatch to hand on, then wake the scheduler with the model's name (a round for
  offers alone visits only the models they named). Idempotent, so the reconciler and recovery
  may repeat it.

  The caller read the task queued, in another slot: by now it may have been dispatched and
  claimed. A place in the running set scored above ARGV[8] (as a rule the attempt read: a place
  is scored by the attempt its claim starts, see dispatch.lua) is a dispatch of the state read or
  a later one, whose job may claim the task or has: the place stays and the task is not offered
  (a running task must not be listed ready). Only the create journal entry is dropped, as asked:
  the task was offered. A caller that knows that dispatch's job lost passes that place's score
  instead: the running-set repair (sweepActive), having found neither a ready entry, a pick in
  flight nor a job, and an operator's requeue of a queued task (the place it read before the
  task's state: one a dispatch wrote since scores above the attempt read, and stays).

  An offer still waiting for dispatch in a newer queued state than ARGV[7] (a higher attempt, or
  the same one with a later event: the task was queued again after the caller's read, and that
  state offered) is not replaced either: its job would be named for, and its claim fenced by, the
  state read, stale by now. Again only the journal entry is dropped, as asked.

  A caller that can queue the task's BullMQ job itself (ARGV[9] '1', the api's create) takes a
  slot the leader lent (lend.lua) instead, when the model has no ready task, a slot is lent under
  the current leader's token and the tenant has room under the cap lent with it: the task is
  dispatched here as dispatch.lua would (its place, its pick in flight) and not offered, and no
  wake is sent. Nothing waits for the model, so a round would have picked it all the same.

  KEYS[1] ready index (model, tenant)  KEYS[2] tenant's running set  KEYS[3] model's tenants
  KEYS[4] models with ready tasks  KEYS[5] create journal (intake)  KEYS[6] offered states
  KEYS[7] loans  KEYS[8] picks in flight  KEYS[9] leader lease
  ARGV[1] task id  ARGV[2] score (created at, ms)  ARGV[3] tenant  ARGV[4] model
  ARGV[5] wake channel  ARGV[6] '1' to drop the task's journal entry in the same step, else '0'
  ARGV[7] the queued state offered ("<attempt>:<seq>")
  ARGV[8] the highest running-set score this offer may drop (see above)
  ARGV[9] '1' when the caller may take a lent slot, else '0'

  Returns 1 when offered, 2 when dispatched on a lent slot (the caller queues the job and hands
  the pick over), 0 when a newer place or a newer offer holds the task, or {'corrupt', key} when
  a key has the wrong type (nothing is written: Redis does not roll a script back, so every write
  must be known to succeed before the first).
]]
local types = { 'zset', 'zset', 'set', 'set', 'zset', 'hash', 'hash', 'zset' }
-- A key of the wrong type answers WRONGTYPE to a read as well as to a write: the refusal names
-- which of the keys `...` (indexes into KEYS) it was. Any other error (OOM, READONLY) stays the
-- error it is. Nil when `reply` is no error.
local function failed(reply, ...)
  if type(reply) ~= 'table' or not reply['err'] then
    return nil
  end
  if not string.find(reply['err'], 'WRONGTYPE', 1, true) then
    return reply
  end
  for _, i in ipairs({ ... }) do
    local t = redis.call('TYPE', KEYS[i])['ok']
    if t ~= 'none' and t ~= types[i] then
      return { 'corrupt', KEYS[i] .. ' is a ' .. t .. ', not a ' .. types[i] }
    end
  end
  return reply
end
-- Every key written below is checked before the first write, by reads made anyway where there
-- are some instead of a TYPE each (an offer is a command of every create): the running set by
-- its ZSCORE, the offered states by their HGET, both sets by one SINTERCARD (it checks every key
-- it names; an absent one reads empty), the journal only when it is written, the ready index by
-- the first write itself.
local place = redis.pcall('ZSCORE', KEYS[2], ARGV[1])
local offered = redis.pcall('HGET', KEYS[6], ARGV[1])
local refused = failed(place, 2)
  or failed(offered, 6)
  or failed(redis.pcall('SINTERCARD', 2, KEYS[3], KEYS[4], 'LIMIT', 1), 3, 4)
  or (ARGV[6] == '1' and failed(redis.pcall('ZSCORE', KEYS[5], ARGV[1]), 5))
if refused then
  return refused
end
-- Whether queued state `a` ("<attempt>:<seq>") is later than `b`.
local function later(a, b)
  local aa, as = string.match(a, '^(%d+):(%d+)$')
  local ba, bs = string.match(b, '^(%d+):(%d+)$')
  if not aa or not ba then
    return false
  end
  aa, as, ba, bs = tonumber(aa), tonumber(as), tonumber(ba), tonumber(bs)
  return aa > ba or (aa == ba and as > bs)
end
if (place and tonumber(place) > tonumber(ARGV[8])) or (offered and later(offered, ARGV[7])) then
  if ARGV[6] == '1' then
    redis.call('ZREM', KEYS[5], ARGV[1])
  end
  return 0
end
-- A lent slot: only for a task with no place, while nothing of its model waits.
if ARGV[9] == '1' and not place and redis.call('SCARD', KEYS[3]) == 0 then
  local loan = redis.pcall('HMGET', KEYS[7], 'leader', 'cap', 'm:' .. ARGV[4])
  refused = failed(loan, 7) or failed(redis.pcall('ZSCORE', KEYS[8], ARGV[1]), 8)
  if refused then
    return refused
  end
  local leader = redis.call('GET', KEYS[9])
  local attempt = tonumber(string.match(ARGV[7], '^(%d+):') or '')
  if attempt and loan[1] and loan[1] == leader and tonumber(loan[3] or '0') > 0
    and redis.call('ZCARD', KEYS[2]) < tonumber(loan[2]) then
    redis.call('HINCRBY', KEYS[7], 'm:' .. ARGV[4], -1)
    -- Scored as dispatch.lua scores a pick's place: by the attempt its claim starts.
    redis.call('ZADD', KEYS[2], attempt + 1, ARGV[1])
    -- The pick's time: the caller's, a fresh create's (the only one to ask for a loan).
    redis.call('ZADD', KEYS[8], ARGV[2], ARGV[1])
    if offered then
      redis.call('HDEL', KEYS[6], ARGV[1])
    end
    if ARGV[6] == '1' then
      redis.call('ZREM', KEYS[5], ARGV[1])
    end
    return 2
  end
end
-- The first write checks its own key: failing, it leaves nothing written.
refused = failed(redis.pcall('ZADD', KEYS[1], 'NX', ARGV[2], ARGV[1]), 1)
if refused then
  return refused
end
if place then
  redis.call('ZREM', KEYS[2], ARGV[1])
end
redis.call('SADD', KEYS[3], ARGV[3])
redis.call('SADD', KEYS[4], ARGV[4])
redis.call('HSET', KEYS[6], ARGV[1], ARGV[7])
if ARGV[6] == '1' then
  redis.call('ZREM', KEYS[5], ARGV[1])
end
redis.call('PUBLISH', ARGV[5], ARGV[4])
return 1
