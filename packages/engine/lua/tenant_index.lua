--[[
  Notes a tenant's create in the operator's tenant index, scored by Redis's clock (see serverMs):
  the index sweep picks the tenants that created since its last round by that clock, so an api
  host whose clock runs behind the scheduler's still has its tenants' indexes bounded.

  KEYS[1] tl:{ops}:tenants
  ARGV[1] tenant

  Returns the number of tenants added (0 or 1).
]]
return redis.call('ZADD', KEYS[1], serverMs(), ARGV[1])
