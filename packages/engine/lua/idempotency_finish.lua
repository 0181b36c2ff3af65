--[[
  Mark an Idempotency-Key's create as finished, if the record still names this task.

  KEYS[1] idempotency record (hash)
  ARGV[1] task id

  Returns 1 when marked, 0 when the record is gone or names another task.
]]
if redis.call('HGET', KEYS[1], 'task') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'done')
return 1
