--[[
  Frees what a parked attempt held in the scheduler's index: its task's place in the tenant's
  running set and its lease entry, only while that place is still the attempt's own. A place is
  scored by the attempt its dispatch was for (dispatch.lua), so the place of a new attempt
  dispatched under the same id after an answer queued the task (a higher attempt) stays. The
  lease entry goes with the place: a new attempt's claim writes its lease entry only after its
  dispatch re-scored the place, so while the place is the parked attempt's, so is the lease entry.
  Where the place is not (gone, re-scored, or written before places were scored by attempt),
  nothing goes: the lease sweep and the running-set sweep drop what is left, each after reading
  the task.

  KEYS[1] lease index  tl:{sched}:leases  KEYS[2] the tenant's running set  tl:{sched}:active:<tenant>
  ARGV[1] task id  ARGV[2] the parked attempt

  Returns how many entries it removed.
]]
-- Both read before either is written: a key of the wrong type fails the script with nothing removed.
local place = redis.call('ZSCORE', KEYS[2], ARGV[1])
redis.call('ZSCORE', KEYS[1], ARGV[1])
if not place or tonumber(place) ~= tonumber(ARGV[2]) then
  return 0
end
return redis.call('ZREM', KEYS[2], ARGV[1]) + redis.call('ZREM', KEYS[1], ARGV[1])
