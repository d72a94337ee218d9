#!lua flags=allow-oom
-- allow-oom (see scripts.py): deletes the pending entries of settled URLs.
-- settle.lua: Celery engine. Fingerprints whose outcome is in the store leave `pending` and are
-- counted once, however often a task is delivered again.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] pending     hash  fingerprint -> owner "\n" request JSON
-- KEYS[2] pending_at  zset  pending fingerprint -> due Unix ms
-- KEYS[3] stats       hash  counters: done, dead, frontier_full
-- KEYS[4] strikes     hash  kind "\n" host -> strikes in a row (shared with the native frontier)
-- KEYS[5] policy      hash  host -> "delay_ms concurrency[ flags]"
-- KEYS[6] dead_requests hash fingerprint -> owner "\n" request JSON of a dead-lettered URL
--                     (kept for crawlq dead replay and inspect)
-- ARGV[1] n_done (fingerprints stored as a page or filtered record, first in the list)
-- ARGV[2] n_hosts: hosts that answered (their strikes and breaker flags are cleared)
-- ARGV[3] links of these pages that a Redis at its maxmemory refused to admit: counted in
--         frontier_full when this step settles something (once, however often a task runs)
-- ARGV[4..3+n_hosts] those hosts
-- ARGV[4+n_hosts..] fingerprints: the n_done "done" ones, then the dead-lettered ones
-- Returns: how many were pending (and are now settled).
check_job()
local pending, pending_at, stats = KEYS[1], KEYS[2], KEYS[3]
local strikes, policy, dead_requests = KEYS[4], KEYS[5], KEYS[6]
local n_done, n_hosts, refused = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local HOSTS = 4 -- ARGV[HOSTS..HOSTS + n_hosts - 1]: the hosts that answered
for h = HOSTS, HOSTS + n_hosts - 1 do host_answered(strikes, policy, ARGV[h]) end
local first = HOSTS + n_hosts
local done, dead = 0, 0
for i = first, #ARGV do
  local fp = ARGV[i]
  local value = redis.call("HGET", pending, fp)
  if value then
    redis.call("HDEL", pending, fp)
    redis.call("ZREM", pending_at, fp)
    if i - first < n_done then
      done = done + 1
    else
      dead = dead + 1
      redis.call("HSET", dead_requests, fp, value)
    end
  end
end
if done > 0 then redis.call("HINCRBY", stats, "done", done) end
if dead > 0 then redis.call("HINCRBY", stats, "dead", dead) end
if refused > 0 and done + dead > 0 then redis.call("HINCRBY", stats, "frontier_full", refused) end
return done + dead
