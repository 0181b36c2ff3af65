--[[
  Takes back the lease index entry a refused claim wrote before its script ran, where the task had
  none (TaskStore.claim writes only there): the index as the claim found it. Only while nothing
  else may have written the entry since, which its score cannot tell (two claims in one ms write
  the same deadline):
  - an entry scored after ARGV[2] is a later claim's or renewal's, and stays;
  - a place in the tenant's running set scored above ARGV[3], the attempt the refusal saw, is a
    dispatch of the task's state after it (a place is scored by the attempt its claim starts, see
    dispatch.lua), whose job may have claimed the task since and kept this entry as its own: it
    stays, and the lease sweep drops it if nobody holds the task.
  A refusal that found the task held (another attempt's lease, ARGV[4]) puts that lease in place
  of the entry instead: that attempt's claim may have found this entry and kept it.

  KEYS[1] lease index  tl:{sched}:leases  KEYS[2] the tenant's running set  tl:{sched}:active:<tenant>
  ARGV[1] task id  ARGV[2] the deadline the refused claim wrote  ARGV[3] the attempt its refusal saw
  ARGV[4] the lease the refusal found the task holding, '' for none

  Returns 1 when the entry was taken back or set to that lease, else 0.
]]
-- Both read before either is written: a key of the wrong type fails the script with nothing written.
local entry = redis.call('ZSCORE', KEYS[1], ARGV[1])
local place = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not entry or tonumber(entry) > tonumber(ARGV[2]) then
  return 0
end
if place and tonumber(place) > tonumber(ARGV[3]) then
  return 0
end
if ARGV[4] ~= '' then
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
  return 1
end
return redis.call('ZREM', KEYS[1], ARGV[1])
