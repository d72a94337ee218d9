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
local mode, now, budget = ARGV[1], ARGV[2], tonumber(ARGV[3])
local admitted_key = KEYS[5]
local out, added, over, room, admitted = {}, 0, 0, {}, {}
for i = 4, #ARGV, 4 do
  local fp, owner, host = ARGV[i], ARGV[i + 1], ARGV[i + 3]
  local ok = false
  local full = false
  if budget >= 0 then
    if room[host] == nil then
      room[host] = budget - (tonumber(redis.call("HGET", admitted_key, host)) or 0)
    end
    full = room[host] <= 0
  end
  if full and redis.call("SISMEMBER", KEYS[1], fp) == 0 then
    over = over + 1
  elseif not full and redis.call("SADD", KEYS[1], fp) == 1 then
    redis.call("HSET", KEYS[2], fp, owner .. "\n" .. ARGV[i + 2])
    added = added + 1
    admitted[host] = (admitted[host] or 0) + 1
    if budget >= 0 then room[host] = room[host] - 1 end
    ok = true
  else
    local held = redis.call("HGET", KEYS[2], fp)
    if held and (mode == "run" or string.sub(held, 1, #owner + 1) == owner .. "\n") then
      ok = true
    end
  end
  if ok then
    redis.call("ZADD", KEYS[3], now, fp)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
for host, n in pairs(admitted) do  -- HSET, not HINCRBY: a garbled count must not fail the step
  redis.call("HSET", admitted_key, host, (tonumber(redis.call("HGET", admitted_key, host)) or 0) + n)
end
if added > 0 then redis.call("HINCRBY", KEYS[4], "seen", added) end
if over > 0 then redis.call("HINCRBY", KEYS[4], "over_budget", over) end
return out
