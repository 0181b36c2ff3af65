--[[
  Writes deadlines into a time-scored index of the `{sched}` slot (leases, held calls), stamped by
  Redis's clock like the leases themselves (see serverMs): the sweeps read these indexes by that
  clock, never by a writer's.

  KEYS[1] the index (zset)  tl:{sched}:leases or tl:{sched}:held
  ARGV[1] lease (ms)  ARGV[2] ZADD condition: 'NX' (only a task with no entry), 'GT' (never move
  a deadline back) or '' (set)  ARGV[3 ..] task ids

  Returns {added, deadline}: how many entries were new, and the deadline written (ms).
]]
local deadline = serverMs() + tonumber(ARGV[1])
local args = {}
if ARGV[2] ~= '' then
  args[1] = ARGV[2]
end
for i = 3, #ARGV do
  args[#args + 1] = deadline
  args[#args + 1] = ARGV[i]
end
return { redis.call('ZADD', KEYS[1], unpack(args)), deadline }
