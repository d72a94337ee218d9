-- push.lua: queue the requests whose fingerprints were never seen (atomic dedup + enqueue).
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1..6] the host bookkeeping keys (host_keys() in _lib.lua: ready, inflight, next,
--            policy, inbox, idle)
-- KEYS[7]  seen      set of 20-byte fingerprints (dedup "set") or Bloom bits string ("bloom")
-- KEYS[8]  reqs      hash  fp -> queue score "\n" request JSON (record_score() in _lib.lua)
-- KEYS[9]  stats     hash  counters (queued, seen, seq, dead, dropped, over_budget)
-- KEYS[10] claim     list  the calling worker's inbox claim, deleted when ARGV[5] == "1"
-- KEYS[11] admitted  hash  host -> new fingerprints ever pushed (the page budget's count)
-- KEYS[12] dead      hash  fp -> reason "\n" record (drop-lowest's dead letters)
-- KEYS[13] dead_at   hash  fp -> Unix ms it was dead-lettered (drop-lowest)
-- KEYS[14..13+H] q:{host} zset of each host named in ARGV (same order)
-- ARGV[1] now (Unix ms)  ARGV[2] default concurrency
-- ARGV[3] dedup mode "set" | "bloom"   ARGV[4] k = Bloom bit positions per request (0 for set)
-- ARGV[5] "1" to delete KEYS[10] (the inbox entries are pushed), else "0"
-- ARGV[6] most requests queued in the job (0: no bound)   ARGV[7] most queued per host (0: none)
-- ARGV[8] at a bound: "block" (a producer's new requests that do not fit are refused, not
--   marked seen) or "drop" (the lowest-priority request of the host's queue, maybe the new
--   one, is dead-lettered "frontier_full")   ARGV[9] "1": a producer's push, else "0" (a
--   worker's links: "block" does not apply to them)
-- ARGV[10] H = number of hosts, ARGV[11..10+H] host names
-- ARGV[11+H] O = number of per-host overrides, then O triples: host index, delay (ms),
--   concurrency: written for hosts with no policy entry yet (crawlq.rules.politeness overrides)
-- then B = the page budget per host (max_pages_per_host; -1: none): a new fingerprint of a
--   host with B admitted already is neither queued nor marked seen, only counted
--   (stats over_budget)
-- then per request: fp, host index (1..H), priority (int), request JSON, then k bit positions
-- Returns: {queued (new requests queued), refused (block), dropped (drop)}.
check_job()
local hk = host_keys()
local seen_key, reqs, stats = KEYS[7], KEYS[8], KEYS[9]
local claim, admitted_key, dead_key, dead_at_key = KEYS[10], KEYS[11], KEYS[12], KEYS[13]
local QUEUES = 13 -- KEYS[QUEUES + h]: host h's queue
local now, dconc = tonumber(ARGV[1]), tonumber(ARGV[2])
local mode, k = ARGV[3], tonumber(ARGV[4])
local drop_claim = ARGV[5] == "1"
local max_job, max_host = tonumber(ARGV[6]), tonumber(ARGV[7])
local drop_mode, producer = ARGV[8] == "drop", ARGV[9] == "1"
local nhosts = tonumber(ARGV[10])
local HOSTS = 10 -- ARGV[HOSTS + h]: host h's name
local noverrides = tonumber(ARGV[11 + nhosts])
local OVERRIDES = 12 + nhosts -- ARGV[OVERRIDES + 3 * o ..]: override o (from 0)
local budget = tonumber(ARGV[OVERRIDES + 3 * noverrides])
local FIRST = OVERRIDES + 3 * noverrides + 1 -- ARGV[FIRST]: the first request's fp
local PRIO = 8589934592 -- 2^33: score = -priority * 2^33 + push sequence

local added, refused, dropped, evicted, touched = 0, 0, 0, 0, {}
local queued = tonumber(redis.call("HGET", stats, "queued") or "0")
local bounded = max_job > 0 or max_host > 0
for o = 0, noverrides - 1 do
  local at = OVERRIDES + 3 * o
  local host = ARGV[HOSTS + tonumber(ARGV[at])]
  if redis.call("HEXISTS", hk.policy, host) == 0 then
    set_policy(hk.policy, host, ARGV[at + 1], ARGV[at + 2], "")
  end
end
local room, admitted, over = {}, {}, 0

-- Whether fp was pushed before (without marking it).
local function seen_before(i, fp)
  if mode == "set" then return redis.call("SISMEMBER", seen_key, fp) == 1 end
  for j = 1, k do
    if redis.call("GETBIT", seen_key, ARGV[i + 3 + j]) == 0 then return false end
  end
  return true
end

-- Mark fp seen; true when it was new.
local function mark_seen(i, fp)
  if mode == "set" then return redis.call("SADD", seen_key, fp) == 1 end
  local new = false
  for j = 1, k do
    if redis.call("GETBIT", seen_key, ARGV[i + 3 + j]) == 0 then new = true end
  end
  if new then
    for j = 1, k do redis.call("SETBIT", seen_key, ARGV[i + 3 + j], 1) end
  end
  return new
end

local i = FIRST
while i <= #ARGV do
  local fp, hidx, prio, value = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), ARGV[i + 3]
  local queue = KEYS[QUEUES + hidx]
  local over_budget = false
  if budget >= 0 then
    if room[hidx] == nil then
      room[hidx] = budget - (tonumber(redis.call("HGET", admitted_key, ARGV[HOSTS + hidx])) or 0)
    end
    over_budget = room[hidx] <= 0
  end
  local full = bounded and ((max_job > 0 and queued + added - evicted >= max_job)
    or (max_host > 0 and redis.call("ZCARD", queue) >= max_host))
  if over_budget then
    if not seen_before(i, fp) then over = over + 1 end
  elseif full and not drop_mode and producer then
    if not seen_before(i, fp) then refused = refused + 1 end
  elseif mark_seen(i, fp) then
    admitted[hidx] = (admitted[hidx] or 0) + 1
    if budget >= 0 then room[hidx] = room[hidx] - 1 end
    local seq = redis.call("HINCRBY", stats, "seq", 1)
    local score = string.format("%.0f", -prio * PRIO + seq)
    local record = score .. "\n" .. value
    local keep = true
    if full and drop_mode then
      local out
      keep, out = drop_lowest(queue, reqs, dead_key, dead_at_key, fp, score, record, now)
      evicted = evicted + out
      if not keep then redis.call("HINCRBY", stats, "seen", 1) end
      dropped = dropped + 1
    end
    if keep then
      redis.call("HSET", reqs, fp, record)
      redis.call("ZADD", queue, score, fp)
      added = added + 1
      touched[hidx] = true
    end
  end
  i = i + 4 + k
end
for hidx, n in pairs(admitted) do  -- HSET, not HINCRBY: a garbled count must not fail the step
  local host = ARGV[HOSTS + hidx]
  redis.call("HSET", admitted_key, host, (tonumber(redis.call("HGET", admitted_key, host)) or 0) + n)
end
if over > 0 then redis.call("HINCRBY", stats, "over_budget", over) end
if dropped > 0 then
  redis.call("HINCRBY", stats, "dead", dropped)
  redis.call("HINCRBY", stats, "dropped", dropped)
end
if added > 0 or evicted > 0 then
  redis.call("HINCRBY", stats, "queued", added - evicted)
  redis.call("HINCRBY", stats, "seen", added)
end
if added > 0 then
  local hosts = {}
  for hidx in pairs(touched) do hosts[#hosts + 1] = {ARGV[HOSTS + hidx], KEYS[QUEUES + hidx]} end
  make_ready(hk, hosts, dconc, added)
end
if drop_claim then redis.call("DEL", claim) end
return {added, refused, dropped}
