--[[
  The leader lends a model's free worker slots to the creates (enqueue.lua), atomically over the
  {sched} slot: a create that finds its model with no ready task, a lent slot and room under its
  tenant's cap dispatches its own task and skips the dispatch round (nothing waits, so no one is
  passed over). Each call replaces the loans it names, and answers how many slots were taken from
  each since the last: jobs queued since, which the leader's count of waiting jobs may not hold.
  A loan is the leader's: creates take from it only while the lease names the token it was made
  under, and a new leader's first call finds none of its own (the last leader's takes are in the
  queue counts it reads afresh).

  KEYS[1] leader lease
  KEYS[2] loans (hash: `leader`, `cap`, `m:<model>` slots left, `n:<model>` slots lent)
  ARGV[1] token  ARGV[2] max running per tenant  ARGV[3 ..] model, slots, ...

  Returns {'not_leader'} | {'ok', taken, taken, ...}: per model in order, the slots taken from
  its last loan.
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {'not_leader'} end
-- Loans are the leader's to remake: a key of the wrong type is replaced, not refused.
local own = redis.call('TYPE', KEYS[2])['ok'] == 'hash' and redis.call('HGET', KEYS[2], 'leader') == ARGV[1]
if not own then redis.call('DEL', KEYS[2]) end
redis.call('HSET', KEYS[2], 'leader', ARGV[1], 'cap', ARGV[2])
local out = {'ok'}
for i = 3, #ARGV - 1, 2 do
  local model = ARGV[i]
  local last = redis.call('HMGET', KEYS[2], 'n:' .. model, 'm:' .. model)
  local taken = math.max(0, tonumber(last[1] or '0') - tonumber(last[2] or '0'))
  local lent = tonumber(ARGV[i + 1])
  if lent > 0 then
    redis.call('HSET', KEYS[2], 'n:' .. model, lent, 'm:' .. model, lent)
  else
    redis.call('HDEL', KEYS[2], 'n:' .. model, 'm:' .. model)
  end
  out[#out + 1] = taken
end
return out
