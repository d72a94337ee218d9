#!lua flags=allow-oom
-- allow-oom (see scripts.py): deletes the pending entries of settled URLs.
-- settle.lua: Celery engine. Fingerprints whose outcome is in the store leave `pending` and are
-- counted once, however often a task is delivered again.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] pending     hash  fingerprint -> owner "\n" request JSON
-- KEYS[2] pending_at  zset  pending fingerprint -> due Unix ms
-- KEYS[3] stats       hash  counters: done, dead, frontier_full, and the run counters of the
--                     settled URLs' outcomes ("run:items", "run:dropped\n<reason>", ...)
-- KEYS[4] strikes     hash  kind "\n" host -> strikes in a row (shared with the native frontier)
-- KEYS[5] policy      hash  host -> "delay_ms concurrency[ flags]"
-- KEYS[6] dead_requests hash fingerprint -> owner "\n" request JSON of a dead-lettered URL
--                     (kept for crawlq dead replay and inspect)
-- ARGV[1] n_done (fingerprints stored as a page or filtered record, first in the list)
-- ARGV[2] n_hosts: hosts that answered (their strikes and breaker flags are cleared)
-- ARGV[3] links of these pages that a Redis at its maxmemory refused to admit: counted in
--         frontier_full when this step settles something (once, however often a task runs)
-- ARGV[4..3+n_hosts] those hosts
-- ARGV[4+n_hosts..] fingerprints: the n_done "done" ones, then the dead-lettered ones; then as
--         many JSON objects, one per fingerprint in the same order ("" for none): the run
--         counters of its outcome (field -> count), added to stats only if that fingerprint
--         was pending, so a task delivered again after it settled counts them once
-- Returns: how many were pending (and are now settled).
check_job()
local pending, pending_at, stats = KEYS[1], KEYS[2], KEYS[3]
local strikes, policy, dead_requests = KEYS[4], KEYS[5], KEYS[6]
local n_done, n_hosts, refused = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local HOSTS = 4 -- ARGV[HOSTS..HOSTS + n_hosts - 1]: the hosts that answered
for h = HOSTS, HOSTS + n_hosts - 1 do host_answered(strikes, policy, ARGV[h]) end
local first = HOSTS + n_hosts
local n_fps = (#ARGV - first + 1) / 2
local done, dead = 0, 0
for i = first, first + n_fps - 1 do
  local fp = ARGV[i]
  local value = redis.call("HGET", pending, fp)
  if value then
    redis.call("HDEL", pending, fp)
    redis.call("ZREM", pending_at, fp)
    local counts = ARGV[i + n_fps]
    if counts ~= "" then
      for field, n in pairs(cjson.decode(counts)) do
        redis.call("HINCRBY", stats, field, n)
      end
    end
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
