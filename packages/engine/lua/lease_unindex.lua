--[[
  Drop a task from the lease index only if its entry is still the lapsed one the sweep saw: a
  claim that re-indexed the task meanwhile (a later deadline) keeps its entry.

  KEYS[1] lease index (zset)  tl:{sched}:leases
  ARGV[1] task id  ARGV[2] deadline (ms): remove only an entry scored at or before it

  Returns 1 when removed, else 0.
]]
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) <= tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
