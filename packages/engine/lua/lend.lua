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
-- One read of what the last loan left (each model's slots lent and left), and whose it was.
local fields = {'leader', 'cap'}
for i = 3, #ARGV - 1, 2 do
  fields[#fields + 1] = 'n:' .. ARGV[i]
  fields[#fields + 1] = 'm:' .. ARGV[i]
end
local last = redis.pcall('HMGET', KEYS[2], unpack(fields))
-- Loans are the leader's to remake: a key of the wrong type is replaced, not refused, and a
-- last leader's loans are dropped whole.
local own = type(last) == 'table' and not last['err'] and last[1] == ARGV[1]
if not own then
  redis.call('DEL', KEYS[2])
  last = {}
end
if not own or last[2] ~= ARGV[2] then redis.call('HSET', KEYS[2], 'leader', ARGV[1], 'cap', ARGV[2]) end
local out = {'ok'}
for i = 3, #ARGV - 1, 2 do
  local n, m = tonumber(last[i] or '0'), tonumber(last[i + 1] or '0')
  local lent = tonumber(ARGV[i + 1])
  out[#out + 1] = math.max(0, n - m)
  if lent > 0 and (lent ~= n or lent ~= m) then
    redis.call('HSET', KEYS[2], 'n:' .. ARGV[i], lent, 'm:' .. ARGV[i], lent)
  elseif lent <= 0 and n > 0 then
    redis.call('HDEL', KEYS[2], 'n:' .. ARGV[i], 'm:' .. ARGV[i])
  end
end
return out
