-- push.lua: queue the requests whose fingerprints were never seen (atomic dedup + enqueue).
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1]  seen      set of 20-byte fingerprints (dedup "set") or Bloom bits string ("bloom")
-- KEYS[2]  reqs      hash  fp -> host "\n" request JSON
-- KEYS[3]  scores    hash  fp -> queue score
-- KEYS[4]  stats     hash  counters (queued, seen, seq, dead, dropped, over_budget)
-- KEYS[5]  ready     zset  host -> next-allowed Unix ms
-- KEYS[6]  inflight  hash  host -> leases held
-- KEYS[7]  next      hash  host -> next-allowed Unix ms
-- KEYS[8]  policy    hash  host -> "delay_ms concurrency"
-- KEYS[9]  inbox     list  (wake-up tokens "" for idle workers go here)
-- KEYS[10] idle      zset  worker -> waiting since (Unix ms)
-- KEYS[11] claim     list  the calling worker's inbox claim, deleted when ARGV[6] == "1"
-- KEYS[12] admitted  hash  host -> new fingerprints ever pushed (the page budget's count)
-- KEYS[13..12+H] q:{host} zset of each host named in ARGV (same order)
-- KEYS[13+H] dead    hash  fp -> reason "\n" value (drop-lowest's dead letters)
-- ARGV[1] now (Unix ms)  ARGV[2] default delay (ms; unused here)  ARGV[3] default concurrency
-- ARGV[4] dedup mode "set" | "bloom"   ARGV[5] k = Bloom bit positions per request (0 for set)
-- ARGV[6] "1" to delete KEYS[11] (the inbox entries are pushed), else "0"
-- ARGV[7] most requests queued in the job (0: no bound)   ARGV[8] most queued per host (0: none)
-- ARGV[9] at a bound: "block" (a producer's new requests that do not fit are refused, not
--   marked seen) or "drop" (the lowest-priority request of the host's queue, maybe the new
--   one, is dead-lettered "frontier_full")   ARGV[10] "1": a producer's push, else "0" (a
--   worker's links: "block" does not apply to them)
-- ARGV[11] H = number of hosts, ARGV[12..11+H] host names
-- ARGV[12+H] O = number of per-host overrides, then O triples: host index, delay (ms),
--   concurrency: written for hosts with no policy entry yet (crawlq.politeness overrides)
-- then B = the page budget per host (max_pages_per_host; -1: none): a new fingerprint of a
--   host with B admitted already is neither queued nor marked seen, only counted
--   (stats over_budget)
-- then per request: fp, host index (1..H), priority (int), value, then k bit positions
-- Returns: {queued (new requests queued), refused (block), dropped (drop)}.
check_job()
local now = tonumber(ARGV[1])
local dconc = tonumber(ARGV[3])
local mode, k = ARGV[4], tonumber(ARGV[5])
local max_job, max_host = tonumber(ARGV[7]), tonumber(ARGV[8])
local drop_mode, producer = ARGV[9] == "drop", ARGV[10] == "1"
local nhosts = tonumber(ARGV[11])
local admitted_key = KEYS[12]
local dead_key = KEYS[13 + nhosts]
local PRIO = 8589934592 -- 2^33: score = -priority * 2^33 + push sequence
local added, refused, dropped, evicted, touched = 0, 0, 0, 0, {}
local queued = tonumber(redis.call("HGET", KEYS[4], "queued") or "0")
local bounded = max_job > 0 or max_host > 0
local noverrides = tonumber(ARGV[12 + nhosts])
for o = 0, noverrides - 1 do
  local at = 13 + nhosts + 3 * o
  local host = ARGV[11 + tonumber(ARGV[at])]
  if redis.call("HEXISTS", KEYS[8], host) == 0 then
    set_policy(KEYS[8], host, ARGV[at + 1], ARGV[at + 2], "")
  end
end
local budget = tonumber(ARGV[13 + nhosts + 3 * noverrides])
local room, admitted, over = {}, {}, 0

-- Whether fp was pushed before (without marking it).
local function seen_before(i, fp)
  if mode == "set" then return redis.call("SISMEMBER", KEYS[1], fp) == 1 end
  for j = 1, k do
    if redis.call("GETBIT", KEYS[1], ARGV[i + 3 + j]) == 0 then return false end
  end
  return true
end

-- Mark fp seen; true when it was new.
local function mark_seen(i, fp)
  if mode == "set" then return redis.call("SADD", KEYS[1], fp) == 1 end
  local new = false
  for j = 1, k do
    if redis.call("GETBIT", KEYS[1], ARGV[i + 3 + j]) == 0 then new = true end
  end
  if new then
    for j = 1, k do redis.call("SETBIT", KEYS[1], ARGV[i + 3 + j], 1) end
  end
  return new
end

local i = 14 + nhosts + 3 * noverrides
while i <= #ARGV do
  local fp, hidx, prio, value = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), ARGV[i + 3]
  local queue = KEYS[12 + hidx]
  local over_budget = false
  if budget >= 0 then
    if room[hidx] == nil then
      room[hidx] = budget - (tonumber(redis.call("HGET", admitted_key, ARGV[11 + hidx])) or 0)
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
    local seq = redis.call("HINCRBY", KEYS[4], "seq", 1)
    local score = string.format("%.0f", -prio * PRIO + seq)
    redis.call("HSET", KEYS[3], fp, score)
    local keep = true
    if full and drop_mode then
      local last = redis.call("ZRANGE", queue, -1, -1, "WITHSCORES")
      if #last == 2 and tonumber(last[2]) > tonumber(score) then
        local old = redis.call("HGET", KEYS[2], last[1])
        redis.call("ZREM", queue, last[1])
        redis.call("HDEL", KEYS[2], last[1])
        redis.call("HSET", dead_key, last[1], "frontier_full\n" .. (old or ""))
        evicted = evicted + 1
      else
        keep = false
        redis.call("HSET", dead_key, fp, "frontier_full\n" .. value)
        redis.call("HINCRBY", KEYS[4], "seen", 1)
      end
      dropped = dropped + 1
    end
    if keep then
      redis.call("HSET", KEYS[2], fp, value)
      redis.call("ZADD", queue, score, fp)
      added = added + 1
      touched[hidx] = true
    end
  end
  i = i + 4 + k
end
for hidx, n in pairs(admitted) do  -- HSET, not HINCRBY: a garbled count must not fail the step
  local host = ARGV[11 + hidx]
  redis.call("HSET", admitted_key, host, (tonumber(redis.call("HGET", admitted_key, host)) or 0) + n)
end
if over > 0 then redis.call("HINCRBY", KEYS[4], "over_budget", over) end
if dropped > 0 then
  redis.call("HINCRBY", KEYS[4], "dead", dropped)
  redis.call("HINCRBY", KEYS[4], "dropped", dropped)
end
if added > 0 or evicted > 0 then
  redis.call("HINCRBY", KEYS[4], "queued", added - evicted)
  redis.call("HINCRBY", KEYS[4], "seen", added)
end
if added > 0 then
  local hosts = {}
  for hidx in pairs(touched) do hosts[#hosts + 1] = {ARGV[11 + hidx], KEYS[12 + hidx]} end
  local kk = {ready = KEYS[5], inflight = KEYS[6], next = KEYS[7], policy = KEYS[8],
              inbox = KEYS[9], idle = KEYS[10]}
  make_ready(kk, hosts, dconc, added)
end
if ARGV[6] == "1" then redis.call("DEL", KEYS[11]) end
return {added, refused, dropped}
