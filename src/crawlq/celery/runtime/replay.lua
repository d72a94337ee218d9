-- replay.lua: Celery engine. Make dead-lettered URLs pending again (crawlq dead replay), so
-- that the tasks the caller sends next run them: the admit step of a replay.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] seen          set   20-byte fingerprints ever admitted
-- KEYS[2] pending       hash  fingerprint -> owner "\n" request JSON, until settled
-- KEYS[3] pending_at    zset  pending fingerprint -> Unix ms by which a task should run it
-- KEYS[4] stats         hash  counters: dead
-- KEYS[5] dead_requests hash  fingerprint -> owner "\n" request JSON of a dead-lettered URL
-- ARGV[1] now (Unix ms): the due time of the URLs made pending
-- ARGV[2..] pairs: fingerprint, request JSON
-- A URL is made pending only when this job admitted it once and it is not pending now (its
-- outcome is stored): dedup holds, and two replays at once send it once.
-- Returns: array of 1 (pending again: send it) or 0 (skipped), one per pair.
check_job()
local seen, pending, pending_at = KEYS[1], KEYS[2], KEYS[3]
local stats, dead_requests = KEYS[4], KEYS[5]
local now = ARGV[1]
local out, replayed = {}, 0
for i = 2, #ARGV, 2 do
  local fp = ARGV[i]
  if redis.call("SISMEMBER", seen, fp) == 1 and redis.call("HEXISTS", pending, fp) == 0 then
    redis.call("HSET", pending, fp, "replay\n" .. ARGV[i + 1])
    redis.call("ZADD", pending_at, now, fp)
    redis.call("HDEL", dead_requests, fp)
    replayed = replayed + 1
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
if replayed > 0 then redis.call("HINCRBY", stats, "dead", -replayed) end
return out
