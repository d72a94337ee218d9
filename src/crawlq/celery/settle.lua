-- settle.lua: Celery engine. Fingerprints whose outcome is in the store leave `pending` and are
-- counted once, however often a task is delivered again.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] pending     hash  fingerprint -> owner "\n" request JSON
-- KEYS[2] pending_at  zset  pending fingerprint -> due Unix ms
-- KEYS[3] stats       hash  counters: done, dead
-- KEYS[4] strikes     hash  kind "\n" host -> strikes in a row (shared with the native frontier)
-- KEYS[5] policy      hash  host -> "delay_ms concurrency[ flags]"
-- KEYS[6] dead_requests hash fingerprint -> owner "\n" request JSON of a dead-lettered URL
--                     (kept for crawlq dead replay and inspect)
-- ARGV[1] n_done (fingerprints stored as a page or filtered record, first in the list)
-- ARGV[2] n_hosts: hosts that answered (their strikes and breaker flags are cleared)
-- ARGV[3..2+n_hosts] those hosts
-- ARGV[3+n_hosts..] fingerprints: the n_done "done" ones, then the dead-lettered ones
-- Returns: how many were pending (and are now settled).
check_job()
local n_done, n_hosts = tonumber(ARGV[1]), tonumber(ARGV[2])
for h = 3, 2 + n_hosts do host_answered(KEYS[4], KEYS[5], ARGV[h]) end
local first = 3 + n_hosts
local done, dead = 0, 0
for i = first, #ARGV do
  local value = redis.call("HGET", KEYS[1], ARGV[i])
  if value then
    redis.call("HDEL", KEYS[1], ARGV[i])
    redis.call("ZREM", KEYS[2], ARGV[i])
    if i - first < n_done then
      done = done + 1
    else
      dead = dead + 1
      redis.call("HSET", KEYS[6], ARGV[i], value)
    end
  end
end
if done > 0 then redis.call("HINCRBY", KEYS[3], "done", done) end
if dead > 0 then redis.call("HINCRBY", KEYS[3], "dead", dead) end
return done + dead
