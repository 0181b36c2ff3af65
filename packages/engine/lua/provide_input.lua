--[[
  The caller answers input requests. Unknown keys and keys already answered are ignored; partial
  answers are kept. Once no asked key is left open, `input_required` -> `running`.

  KEYS[1] task hash  KEYS[2] event stream  KEYS[3] channel  KEYS[4] inputs hash
  ARGV[1] now (ms)
  ARGV[2] number of answers (N); ARGV[3 .. 2+2N] key, answer JSON, ...
  ARGV[3+2N] event type  ARGV[4+2N] event data for the return to `running`

  Returns {'ok', status, accepted} | {'missing'} | {'terminal', status}
        | {'corrupt', what} when a write would fail (nothing is written; see refuseUnwritable)
]]
local status = redis.call('HGET', KEYS[1], 'status')
if not status then
  return { 'missing' }
end
if isTerminal(status) then
  return { 'terminal', status }
end
local unwritable = refuseUnwritable(KEYS[1], KEYS[2], { [KEYS[4]] = 'hash' })
if unwritable then
  return unwritable
end
local n = tonumber(ARGV[2])
local accepted = 0
for i = 3, 2 + 2 * n, 2 do
  if redis.call('HEXISTS', KEYS[4], 'q:' .. ARGV[i]) == 1 and redis.call('HSETNX', KEYS[4], 'a:' .. ARGV[i], ARGV[i + 1]) == 1 then
    accepted = accepted + 1
  end
end
if status == 'input_required' then
  local fields = redis.call('HKEYS', KEYS[4])
  local open = false
  for _, f in ipairs(fields) do
    if string.sub(f, 1, 2) == 'q:' and redis.call('HEXISTS', KEYS[4], 'a:' .. string.sub(f, 3)) == 0 then
      open = true
    end
  end
  if not open then
    status = 'running'
    redis.call('HSET', KEYS[1], 'status', status, 'updated_at', tonumber(ARGV[1]))
    emit(KEYS[1], KEYS[2], KEYS[3], ARGV[3 + 2 * n], ARGV[4 + 2 * n])
  end
end
return { 'ok', status, accepted }
