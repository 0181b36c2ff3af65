--[[
  A client address's failed authentications in the current window: counts one more (a failure)
  or only reads the count (a replica's check of an address it saw fail). The window starts at the
  first failure and is not moved by later ones, so a blocked address is free again when it ends.

  KEYS[1] failures (string counter)        tl:api:auth-failures:{<address>}
  ARGV[1] failures to add (1, or 0 to read)  ARGV[2] window (ms)

  Returns {count, pttl}: the failures in the window and the ms it has left ({0, 0} without any).
]]
local add, window = tonumber(ARGV[1]), tonumber(ARGV[2])
if add > 0 then
  redis.call('INCRBY', KEYS[1], add)
  -- A counter without an expiry (the first failure, or one whose PEXPIRE never ran) gets the window.
  if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], window) end
end
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count == 0 then return {0, 0} end
return {count, redis.call('PTTL', KEYS[1])}
