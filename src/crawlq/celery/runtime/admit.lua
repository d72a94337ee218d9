-- admit.lua: Celery engine dedup. Mark fingerprints seen and pending (atomic set-if-absent),
-- so that two workers discovering one URL enqueue it once; and the per-host page budget.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] seen        set   20-byte fingerprints ever admitted (shared with the native frontier)
-- KEYS[2] pending     hash  fingerprint -> owner "\n" request JSON, until settled
-- KEYS[3] pending_at  zset  pending fingerprint -> Unix ms by which a task should run it
-- KEYS[4] stats       hash  counters: seen, over_budget
-- KEYS[5] admitted    hash  host -> fingerprints of the host ever admitted
-- ARGV[1] mode  "push": before enqueueing (1 = new, or pending under this same owner, whose
--               task was delivered again after a crash and must enqueue it again);
--               "run": a task about to run (1 = new, or still pending: run it)
-- ARGV[2] now (Unix ms): the due time of the URLs returned with 1
-- ARGV[3] the page budget per host (max_pages_per_host; -1: none): a new fingerprint of a
--               host with that many admitted is not admitted (0), only counted (over_budget)
-- ARGV[4..] quadruples: fingerprint, owner (hex fingerprint of the page that found the URL, or
--               a tag such as "seed" or "task"; no "\n"), request JSON, host
-- Returns: array of 1 (enqueue / run it) or 0 (a duplicate, already settled, or over the
--          budget), one per quadruple.
check_job()
local seen, pending, pending_at, stats, admitted_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local mode, now, budget = ARGV[1], ARGV[2], tonumber(ARGV[3])
local FIRST = 4 -- ARGV[FIRST..]: the quadruples
local out, added, over, room, admitted = {}, 0, 0, {}, {}
for i = FIRST, #ARGV, 4 do
  local fp, owner, request, host = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local ok = false
  local full = false
  if budget >= 0 then
    if room[host] == nil then
      room[host] = budget - (tonumber(redis.call("HGET", admitted_key, host)) or 0)
    end
    full = room[host] <= 0
  end
  if full and redis.call("SISMEMBER", seen, fp) == 0 then
    over = over + 1
  elseif not full and redis.call("SADD", seen, fp) == 1 then
    redis.call("HSET", pending, fp, owner .. "\n" .. request)
    added = added + 1
    admitted[host] = (admitted[host] or 0) + 1
    if budget >= 0 then room[host] = room[host] - 1 end
    ok = true
  else
    local held = redis.call("HGET", pending, fp)
    if held and (mode == "run" or string.sub(held, 1, #owner + 1) == owner .. "\n") then
      ok = true
    end
  end
  if ok then
    redis.call("ZADD", pending_at, now, fp)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
for host, n in pairs(admitted) do  -- HSET, not HINCRBY: a garbled count must not fail the step
  redis.call("HSET", admitted_key, host, (tonumber(redis.call("HGET", admitted_key, host)) or 0) + n)
end
if added > 0 then redis.call("HINCRBY", stats, "seen", added) end
if over > 0 then redis.call("HINCRBY", stats, "over_budget", over) end
return out
