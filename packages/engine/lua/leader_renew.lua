--[[
  Extends the leadership lease only for the holder of the token (a paused ex-leader cannot).

  KEYS[1] leader lease
  ARGV[1] token  ARGV[2] lease (ms)

  Returns 1 when extended, else 0.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
