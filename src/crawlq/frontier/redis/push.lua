-- push.lua: queue the requests whose fingerprints were never seen (atomic dedup + enqueue).
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1]  seen      set of 20-byte fingerprints (dedup "set") or Bloom bits string ("bloom")
-- KEYS[2]  reqs      hash  fp -> host "\n" request JSON
-- KEYS[3]  scores    hash  fp -> queue score
-- KEYS[4]  stats     hash  counters (queued, seen, seq, over_budget)
-- KEYS[5]  ready     zset  host -> next-allowed Unix ms
-- KEYS[6]  inflight  hash  host -> leases held
-- KEYS[7]  next      hash  host -> next-allowed Unix ms
-- KEYS[8]  policy    hash  host -> "delay_ms concurrency"
-- KEYS[9]  inbox     list  (wake-up tokens "" for idle workers go here)
-- KEYS[10] idle      zset  worker -> waiting since (Unix ms)
-- KEYS[11] claim     list  the calling worker's inbox claim, deleted when ARGV[6] == "1"
-- KEYS[12] admitted  hash  host -> new fingerprints ever pushed (the page budget's count)
-- KEYS[13..12+H] q:{host} zset of each host named in ARGV (same order)
-- ARGV[1] now (Unix ms)  ARGV[2] default delay (ms; unused here)  ARGV[3] default concurrency
-- ARGV[4] dedup mode "set" | "bloom"   ARGV[5] k = Bloom bit positions per request (0 for set)
-- ARGV[6] "1" to delete KEYS[11] (the inbox entries are pushed), else "0"
-- ARGV[7] H = number of hosts, ARGV[8..7+H] host names
-- ARGV[8+H] O = number of per-host overrides, then O triples: host index, delay (ms),
--   concurrency: written for hosts with no policy entry yet (crawlq.politeness overrides)
-- then B = the page budget per host (max_pages_per_host; -1: none): a new fingerprint of a
--   host with B admitted already is neither queued nor marked seen, only counted
--   (stats over_budget)
-- then per request: fp, host index (1..H), priority (int), value, then k bit positions
-- Returns: number of requests that were new and queued.
check_job()
local now = tonumber(ARGV[1])
local dconc = tonumber(ARGV[3])
local mode, k = ARGV[4], tonumber(ARGV[5])
local nhosts = tonumber(ARGV[7])
local PRIO = 8589934592 -- 2^33: score = -priority * 2^33 + push sequence
local added, touched = 0, {}
local noverrides = tonumber(ARGV[8 + nhosts])
for o = 0, noverrides - 1 do
  local at = 9 + nhosts + 3 * o
  local host = ARGV[7 + tonumber(ARGV[at])]
  if redis.call("HEXISTS", KEYS[8], host) == 0 then
    set_policy(KEYS[8], host, ARGV[at + 1], ARGV[at + 2], "")
  end
end
local budget = tonumber(ARGV[9 + nhosts + 3 * noverrides])
local admitted_key = KEYS[12]
local room, admitted, over = {}, {}, 0
local i = 10 + nhosts + 3 * noverrides
while i <= #ARGV do
  local fp, hidx, prio, value = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), ARGV[i + 3]
  local full = false
  if budget >= 0 then
    if room[hidx] == nil then
      room[hidx] = budget - (tonumber(redis.call("HGET", admitted_key, ARGV[7 + hidx])) or 0)
    end
    full = room[hidx] <= 0
  end
  local new
  if mode == "set" then
    if full then
      if redis.call("SISMEMBER", KEYS[1], fp) == 0 then over = over + 1 end
      new = false
    else
      new = redis.call("SADD", KEYS[1], fp) == 1
    end
  else
    new = false
    for j = 1, k do
      if redis.call("GETBIT", KEYS[1], ARGV[i + 3 + j]) == 0 then new = true end
    end
    if new and full then
      over = over + 1
      new = false
    elseif new then
      for j = 1, k do redis.call("SETBIT", KEYS[1], ARGV[i + 3 + j], 1) end
    end
  end
  if new then
    local seq = redis.call("HINCRBY", KEYS[4], "seq", 1)
    local score = string.format("%.0f", -prio * PRIO + seq)
    redis.call("HSET", KEYS[2], fp, value)
    redis.call("HSET", KEYS[3], fp, score)
    redis.call("ZADD", KEYS[12 + hidx], score, fp)
    added = added + 1
    touched[hidx] = true
    admitted[hidx] = (admitted[hidx] or 0) + 1
    if budget >= 0 then room[hidx] = room[hidx] - 1 end
  end
  i = i + 4 + k
end
for hidx, n in pairs(admitted) do  -- HSET, not HINCRBY: a garbled count must not fail the step
  local host = ARGV[7 + hidx]
  redis.call("HSET", admitted_key, host, (tonumber(redis.call("HGET", admitted_key, host)) or 0) + n)
end
if over > 0 then redis.call("HINCRBY", KEYS[4], "over_budget", over) end
if added > 0 then
  redis.call("HINCRBY", KEYS[4], "queued", added)
  redis.call("HINCRBY", KEYS[4], "seen", added)
  local hosts = {}
  for hidx in pairs(touched) do hosts[#hosts + 1] = {ARGV[7 + hidx], KEYS[12 + hidx]} end
  local k = {ready = KEYS[5], inflight = KEYS[6], next = KEYS[7], policy = KEYS[8],
             inbox = KEYS[9], idle = KEYS[10]}
  make_ready(k, hosts, dconc, added)
end
if ARGV[6] == "1" then redis.call("DEL", KEYS[11]) end
return added
