--[[
  Settles a create's place under the tenant's unfinished-task cap: the reservation leaves, and the
  task it became (if any) takes its place, in one step, so the cap never counts both or neither.
  With the task id as both (TaskReservation.persist) it writes a place token_bucket.lua holds in
  memory to the AOF: the member leaves and comes back, both writes recorded, where a ZADD of a
  member already there would change nothing and be left out.

  KEYS[1] unfinished tasks (zset)          tl:api:active:{<tenant>}
  ARGV[1] reservation id  ARGV[2] task id ('' when the create made no new task)  ARGV[3] now (ms)
  ARGV[4] how long KEYS[1] is kept after a task takes a place (ms; see TenantLimits)

  Returns 1
]]
redis.call('ZREM', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return 1
