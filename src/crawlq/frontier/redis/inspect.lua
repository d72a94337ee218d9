-- inspect.lua: read one fingerprint's state in one atomic step (crawlq inspect). Writes nothing.
-- KEYS[1] job hash (its id is returned, so the caller sees a job that is gone or replaced)
-- KEYS[2] seen set of fingerprints (dedup "set") or Bloom bits string ("bloom")
-- KEYS[3] reqs hash fp -> score "\n" request JSON  KEYS[4] dead hash fp -> reason "\n" record
-- KEYS[5] attempts hash fp -> deliveries   KEYS[6] owner hash fp -> "lease_id worker"
-- KEYS[7] leases zset fp..host -> deadline Unix ms   KEYS[8] delayed zset fp..host -> due ms
-- KEYS[9] next hash host -> next-allowed Unix ms   KEYS[10] last_error hash fp -> reason
-- KEYS[11] dead_at hash fp -> Unix ms
-- ARGV[1] fp (20 bytes)  ARGV[2] dedup mode "set" | "bloom"
-- ARGV[3] the request's host ("": not known yet; a record does not name its host, the caller
--   reads it from the request JSON and asks again: crawlq.frontier.redis.inspection)
-- ARGV[4..] Bloom bit positions
-- Returns: {job id, seen (1|0), reqs value, dead value, attempts, owner, lease deadline,
-- retry due, host next-allowed, last error, dead at}; a missing value is nil, and so are the
-- lease deadline, retry due and next-allowed time when ARGV[3] is "".
local job, seen_key, reqs, dead = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local attempts, owner, leases, delayed = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local next_at_key, last_error, dead_at = KEYS[9], KEYS[10], KEYS[11]
local fp, mode, host = ARGV[1], ARGV[2], ARGV[3]
local BITS = 3 -- ARGV[BITS + 1 ..]: the Bloom bit positions
local seen = 0
if mode == "set" then
  seen = redis.call("SISMEMBER", seen_key, fp)
else
  seen = 1
  for j = BITS + 1, #ARGV do
    if redis.call("GETBIT", seen_key, ARGV[j]) == 0 then seen = 0 end
  end
end
local value = redis.call("HGET", reqs, fp)
local dead_value = redis.call("HGET", dead, fp)
local deadline, due, next_at = false, false, false
if host ~= "" then
  deadline = redis.call("ZSCORE", leases, fp .. host)
  due = redis.call("ZSCORE", delayed, fp .. host)
  next_at = redis.call("HGET", next_at_key, host)
end
return {
  redis.call("HGET", job, "id"), seen, value, dead_value,
  redis.call("HGET", attempts, fp), redis.call("HGET", owner, fp), deadline, due, next_at,
  redis.call("HGET", last_error, fp), redis.call("HGET", dead_at, fp),
}
