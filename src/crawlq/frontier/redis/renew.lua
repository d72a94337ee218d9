#!lua flags=allow-oom
-- allow-oom (see scripts.py): rewrites lease deadlines and the worker's heartbeat in place.
-- renew.lua: extend the deadlines of leases still held by their lease ids.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] leases zset fp..host -> deadline Unix ms   KEYS[2] owner hash fp -> "lease_id worker"
-- KEYS[3] workers zset worker -> last heartbeat Unix ms
-- ARGV[1] new deadline (Unix ms)  ARGV[2] worker id  ARGV[3] now (Unix ms)
-- then per lease: member (fp..host), fp, lease_id
-- Returns: array of 1 (renewed) or 0 (no longer held), one per lease.
check_job()
local leases, owner, workers = KEYS[1], KEYS[2], KEYS[3]
local deadline, worker, now = ARGV[1], ARGV[2], ARGV[3]
local FIRST = 4 -- ARGV[FIRST]: the first lease's member
redis.call("ZADD", workers, now, worker)
local out = {}
local i = FIRST
while i <= #ARGV do
  local member, fp, lease_id = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local own = redis.call("HGET", owner, fp)
  if own and string.sub(own, 1, #lease_id + 1) == lease_id .. " " then
    redis.call("ZADD", leases, "XX", deadline, member)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
  i = i + 3
end
return out
