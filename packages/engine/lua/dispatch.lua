--[[
  One dispatch round share for one model, atomically over the {sched} slot: weighted round robin
  across the tenants that have ready tasks for the model, so a tenant with a long backlog gets
  `quantum * weight` tasks per turn and every other tenant gets its turn in between. A turn may
  span calls: capacity often frees one slot at a time, and a turn cut short by the budget goes on
  in the next call (`left`), or weights would shrink to what fits in one call. A tenant at its cap
  (counted over all models) or out of tasks ends its turn.
  Picked ids move to `inflight` (and the tenant's `active` set) until the caller has queued them,
  and each comes with the queued state it was offered in ('' for an entry without one). A pick's
  place in the `active` set is scored by the attempt its claim starts (one past the offered
  state's; 0 without a state, which gets no job): what tells it from an earlier attempt's place
  exactly (park_unindex.lua), where a time could be the same millisecond.
  The script reads the model's tenant set itself (a round is one round trip) and builds each
  tenant's keys from the prefixes given, all in the {sched} slot as BullMQ's scripts build a job's
  keys from its queue's prefix.

  KEYS[1] leader lease  KEYS[2] tenants with ready tasks (of the model)
  KEYS[3] round-robin state (of the model)  KEYS[4] inflight  KEYS[5] models  KEYS[6] offered states
  ARGV[1] token  ARGV[2] now (ms)  ARGV[3] budget  ARGV[4] quantum  ARGV[5] max running per tenant
  ARGV[6] model  ARGV[7] ready index prefix (the tenant name follows)  ARGV[8] active set prefix
  ARGV[9] suffix of a tenant's child generations' name (they have the tenant's weight)
  ARGV[10 ..] tenant, weight, ... for tenants whose weight is not 1

  Returns {'not_leader'} | {'corrupt', key} (a key of the wrong type; nothing written)
        | {'ok', tenant, id, offered state, tenant, id, offered state, ...}
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {'not_leader'} end
-- Redis does not roll a script back: every key written below is checked first, so a key of the
-- wrong type refuses the round ({'corrupt', key}) instead of failing it half-way. A key the round
-- reads anyway is checked by that read (a key of the wrong type answers it WRONGTYPE): the
-- tenant set, the round-robin state and each tenant's ready and running counts; the rest by TYPE.
local function wrongType(key, want)
  local t = redis.call('TYPE', key)['ok']
  return t ~= 'none' and t ~= want
end
-- The reply of a read of `key`, or nil and the refusal when it failed.
local function checked(key, ...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply['err'] then return nil, {'corrupt', key} end
  return reply
end
for i, want in ipairs({ 'zset', 'set', 'hash' }) do
  if wrongType(KEYS[i + 3], want) then return {'corrupt', KEYS[i + 3]} end
end
local tenants, refused = checked(KEYS[2], 'SMEMBERS', KEYS[2])
if refused then return refused end
local rr
rr, refused = checked(KEYS[3], 'HMGET', KEYS[3], 'last', 'left')
if refused then return refused end
local max_running = tonumber(ARGV[5])
local weights = {}
for i = 10, #ARGV - 1, 2 do
  weights[ARGV[i]] = tonumber(ARGV[i + 1])
end
local suffix = ARGV[9]
-- Tenant name -> {ready key, active key, weight}, in name order (names are stable; indexes are
-- not). Each tenant's ready and running counts are read once, here, and then kept: a round of
-- many short turns (quantum 1) would otherwise read both again on every turn.
local keys, size, room = {}, {}, {}
for _, tenant in ipairs(tenants) do
  local owner = tenant
  if #tenant > #suffix and string.sub(tenant, -#suffix) == suffix then
    owner = string.sub(tenant, 1, #tenant - #suffix)
  end
  keys[tenant] = { ARGV[7] .. tenant, ARGV[8] .. tenant, weights[owner] or 1 }
  size[tenant], refused = checked(keys[tenant][1], 'ZCARD', keys[tenant][1])
  if refused then return refused end
  local running
  running, refused = checked(keys[tenant][2], 'ZCARD', keys[tenant][2])
  if refused then return refused end
  room[tenant] = max_running - running
end
local now = tonumber(ARGV[2])
local remaining = tonumber(ARGV[3])
local quantum = tonumber(ARGV[4])
local model = ARGV[6]
table.sort(tenants)
local n = #tenants
local out = {'ok'}
if n == 0 then
  redis.call('SREM', KEYS[5], model)
  return out
end
if remaining <= 0 then return out end

-- Go on with the turn in progress, else start with the first tenant after the one served last
-- (names are stable; indexes are not).
local last = rr[1] or ''
local left = tonumber(rr[2] or '0')
local start = nil
if left > 0 then
  for i = 1, n do
    if tenants[i] == last then start = i break end
  end
end
local carry = start ~= nil
if not start then
  start = 1
  for i = 1, n do
    if tenants[i] > last then start = i break end
  end
end

-- The picks' writes (in flight, running sets, offered states) go out together after the loop,
-- in batches.
local visited = {}
-- Tenants that left the model's set: all of them leaves it empty, without a SCARD to tell.
local emptied = 0
-- Picks in order (`owners[i]` is the tenant of `ids[i]`).
local ids, owners = {}, {}
local served = nil
local progress = true
local pos = start
while remaining > 0 and progress do
  progress = false
  for k = 0, n - 1 do
    if remaining <= 0 then break end
    local tenant = tenants[(pos - 1 + k) % n + 1]
    local ready = keys[tenant][1]
    if not visited[tenant] then
      visited[tenant] = true
      if size[tenant] == 0 then
        redis.call('SREM', KEYS[2], tenant)
        emptied = emptied + 1
      end
    end
    if size[tenant] > 0 then
      local allow = quantum * keys[tenant][3]
      if carry then allow = left end
      local budget = remaining
      local take = math.min(allow, room[tenant], budget, size[tenant])
      if take > 0 then
        local popped = redis.call('ZPOPMIN', ready, take)
        for j = 1, #popped, 2 do
          ids[#ids + 1] = popped[j]
          owners[#ids] = tenant
        end
        remaining = remaining - take
        room[tenant] = room[tenant] - take
        size[tenant] = size[tenant] - take
        progress = true
        -- Emptied now: the tenant leaves the model's set at once, not at the next round's visit,
        -- so an empty index reads as empty (the scheduler skips rounds then).
        if size[tenant] == 0 then
          redis.call('SREM', KEYS[2], tenant)
          emptied = emptied + 1
        end
      end
      local rest = 0
      if take == budget and take < allow then rest = allow - take end
      served = { tenant, rest }
    end
    carry = false
  end
end
if served then redis.call('HSET', KEYS[3], 'last', served[1], 'left', served[2]) end

-- Variadic writes in chunks: Lua's unpack takes a few thousand values at most.
local CHUNK = 500
local function inChunks(list, write)
  for i = 1, #list, CHUNK do
    write({ unpack(list, i, math.min(i + CHUNK - 1, #list)) }, i - 1)
  end
end
local function scored(ids)
  local args = {}
  for _, id in ipairs(ids) do
    args[#args + 1] = now
    args[#args + 1] = id
  end
  return args
end
-- The picks' offered states, read first: each running place is scored by the attempt its claim
-- starts. Tenant -> {attempt, id, ...}.
local places = {}
inChunks(ids, function(part, offset)
  local states = redis.call('HMGET', KEYS[6], unpack(part))
  for j, id in ipairs(part) do
    local tenant, state = owners[offset + j], states[j] or ''
    local offered = string.match(state, '^(%d+):')
    places[tenant] = places[tenant] or {}
    table.insert(places[tenant], offered and tonumber(offered) + 1 or 0)
    table.insert(places[tenant], id)
    out[#out + 1] = tenant
    out[#out + 1] = id
    out[#out + 1] = state
  end
end)
-- Chunks of 500 values keep each attempt with its id.
for tenant, place in pairs(places) do
  inChunks(place, function(part) redis.call('ZADD', keys[tenant][2], unpack(part)) end)
end
inChunks(ids, function(part)
  redis.call('ZADD', KEYS[4], unpack(scored(part)))
  redis.call('HDEL', KEYS[6], unpack(part))
end)
if emptied == n then redis.call('SREM', KEYS[5], model) end
return out
