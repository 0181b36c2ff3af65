--[[
  Frees what a parked attempt held in the scheduler's index: its task's lease entry and its place
  in the tenant's running set, each only if it is still the entry that attempt held (the score
  read before it parked). The answer may have queued the task meanwhile and a new attempt been
  dispatched (a new running-set score) and claimed (a new lease deadline): those entries stay.
  A task's entries are keyed by its id alone, so the score is what tells attempts apart.

  KEYS[1] lease index  tl:{sched}:leases  KEYS[2] the tenant's running set  tl:{sched}:active:<tenant>
  ARGV[1] task id  ARGV[2] lease entry's score  ARGV[3] running-set entry's score ('' for none)

  Returns how many entries it removed.
]]
-- Both read before either is written: a key of the wrong type fails the script with nothing removed.
local scores = { redis.call('ZSCORE', KEYS[1], ARGV[1]), redis.call('ZSCORE', KEYS[2], ARGV[1]) }
local removed = 0
for i = 1, 2 do
  local held = ARGV[i + 1]
  if held ~= '' and scores[i] and tonumber(scores[i]) == tonumber(held) then
    removed = removed + redis.call('ZREM', KEYS[i], ARGV[1])
  end
end
return removed
