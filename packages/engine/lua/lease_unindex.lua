--[[
  Drop a task from a time-scored index (leases, parked, intake, held calls) only if its entry is still the one
  the caller saw or wrote: a claim that re-indexed the task meanwhile (a later deadline) keeps its
  entry, as do an ask that parked it again and an answer that journalled it again. With a score
  to put back, the entry gets that score instead of leaving (what an ask refused after its write
  found there).

  KEYS[1] the index (zset)  tl:{sched}:leases, tl:{sched}:parked, tl:{sched}:intake or tl:{sched}:held
  ARGV[1] task id  ARGV[2] score (ms, a deadline or a time): only an entry scored at or before it
  ARGV[3] optional: the score to put back

  Returns 1 when removed or put back, else 0.
]]
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then
  return 0
end
if ARGV[3] then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  return 1
end
return redis.call('ZREM', KEYS[1], ARGV[1])
