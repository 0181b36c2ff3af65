--[[
  Steps down: deletes the lease only if this replica still holds it.

  KEYS[1] leader lease
  ARGV[1] token

  Returns 1 when deleted, else 0.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
