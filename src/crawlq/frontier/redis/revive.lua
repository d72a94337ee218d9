-- revive.lua: put dead-lettered requests back in their host queues, attempts counted afresh
-- (replay_dead; --retry-dead replays them all), under the job's queue bounds as a producer's
-- push (push.lua). The caller chose them from the dead hash; each is re-checked here, so one
-- replayed twice at once is requeued once.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1..6] the host bookkeeping keys (host_keys() in _lib.lua: ready, inflight, next,
--            policy, inbox, idle)
-- KEYS[7] dead hash fp -> reason "\n" record (score "\n" request JSON)
-- KEYS[8] reqs hash fp -> record   KEYS[9] attempts hash fp -> deliveries
-- KEYS[10] stats hash counters
-- KEYS[11] strikes hash kind "\n" host -> count (revived hosts start afresh: breaker closed)
-- KEYS[12] dead_at hash fp -> Unix ms   KEYS[13] last_error hash fp -> last retry reason
-- KEYS[14..13+H] q:{host} per host in ARGV
-- ARGV[1] default concurrency  ARGV[2] now (Unix ms)
-- ARGV[3] most requests queued in the job (0: no bound)  ARGV[4] most queued per host (0: none)
-- ARGV[5] at a bound: "block" (the dead letter stays as it is: refused) or "drop" (the
--   lowest-priority request of the host's queue, maybe the replayed one, is dead-lettered
--   "frontier_full")
-- ARGV[6] H  ARGV[7..6+H] hosts  then per entry: fp, host index
-- Returns: {requeued, refused, dropped, then the entry numbers (1..) of those requeued}.
check_job()
local hk = host_keys()
local dead, reqs, attempts, stats = KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local strikes, dead_at, last_error = KEYS[11], KEYS[12], KEYS[13]
local QUEUES = 13 -- KEYS[QUEUES + h]: host h's queue
local dconc, now = tonumber(ARGV[1]), ARGV[2]
local max_job, max_host, drop_mode = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == "drop"
local nhosts = tonumber(ARGV[6])
local HOSTS = 6 -- ARGV[HOSTS + h]: host h's name
local bounded = max_job > 0 or max_host > 0
local queued = tonumber(redis.call("HGET", stats, "queued") or "0")
local revived, refused, dropped, evicted, touched, which = 0, 0, 0, 0, {}, {}
local i, entry = HOSTS + nhosts + 1, 0
while i <= #ARGV do
  local fp, h = ARGV[i], tonumber(ARGV[i + 1])
  entry = entry + 1
  local v = redis.call("HGET", dead, fp)
  local cut = v and string.find(v, "\n", 1, true)
  if cut then
    local rest = string.sub(v, cut + 1) -- the record, with its score
    local score = record_score(rest)
    local queue = KEYS[QUEUES + h]
    local keep = true
    local full = bounded and ((max_job > 0 and queued + revived - evicted >= max_job)
      or (max_host > 0 and redis.call("ZCARD", queue) >= max_host))
    if full and not drop_mode then
      refused = refused + 1
      keep = false
    elseif full then
      dropped = dropped + 1
      local out
      keep, out = drop_lowest(queue, reqs, dead, dead_at, fp, score, rest, now)
      evicted = evicted + out
    end
    if keep then
      redis.call("HDEL", dead, fp)
      redis.call("HDEL", dead_at, fp)
      redis.call("HDEL", last_error, fp)
      redis.call("HSET", reqs, fp, rest)
      redis.call("HDEL", attempts, fp)
      redis.call("ZADD", queue, score, fp)
      revived = revived + 1
      touched[h] = true
      which[#which + 1] = entry
    end
  end
  i = i + 2
end
if dropped > 0 then redis.call("HINCRBY", stats, "dropped", dropped) end
if revived > 0 or evicted > 0 then
  redis.call("HINCRBY", stats, "dead", evicted - revived)
  redis.call("HINCRBY", stats, "queued", revived - evicted)
end
if revived > 0 then
  local hosts = {}
  for h in pairs(touched) do host_answered(strikes, hk.policy, ARGV[HOSTS + h]) end
  for h in pairs(touched) do hosts[#hosts + 1] = {ARGV[HOSTS + h], KEYS[QUEUES + h]} end
  make_ready(hk, hosts, dconc, revived)
end
local out = {revived, refused, dropped}
for _, n in ipairs(which) do out[#out + 1] = n end
return out
