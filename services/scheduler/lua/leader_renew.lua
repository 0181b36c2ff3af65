-- Extends the leadership lease only for the holder of the token (a paused ex-leader cannot).
-- KEYS: leader   ARGV: token, lease_ms
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
