--[[
  Delete an ended task at once (OpenAI's `DELETE /responses/{id}`): its record, its event log and
  its side keys, what the retention its end set would drop later. Only an ended task: one that
  has not ended is still held by a worker, the scheduler's index or a waiting caller, and a task
  gone under them would leave their writes nothing whole to land on. An idempotent create's mark
  (`tl:{<id>}:created`) stays, as after the task's expiry: a retry of its key gets a new id.

  KEYS[1] task hash  KEYS[2] event stream  KEYS[3] inputs hash  KEYS[4] token snapshot
  ARGV[1] tenant the task must belong to

  Returns {'deleted'} | {'missing'} (none, expired, or another tenant's: told apart from nothing)
        | {'not_ended', status}
]]
local status, tenant = unpack(redis.call('HMGET', KEYS[1], 'status', 'tenant'))
if not status or tenant ~= ARGV[1] then
  return { 'missing' }
end
if not isTerminal(status) then
  return { 'not_ended', status }
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return { 'deleted' }
