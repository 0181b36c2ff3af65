--[[
  Drops a task's place in a tenant's running set only while it is still the place the caller read:
  the same score. A place is scored by the attempt its dispatch was for (dispatch.lua), so a newer
  attempt dispatched under the same id since the read (an answer queued the task, and dispatch
  re-scored its place) keeps its place, and its tenant's cap counts it.

  KEYS[1] the tenant's running set  tl:{sched}:active:<tenant>
  ARGV[1] task id  ARGV[2] the score the caller read

  Returns 1 when removed, else 0.
]]
local place = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not place or tonumber(place) ~= tonumber(ARGV[2]) then
  return 0
end
return redis.call('ZREM', KEYS[1], ARGV[1])
