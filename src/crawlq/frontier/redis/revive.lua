-- revive.lua: put dead-lettered requests back in their host queues, attempts counted afresh
-- (replay_dead; --retry-dead replays them all). The caller chose them from the dead hash; each
-- is re-checked here, so one replayed twice at once is requeued once.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1..6] the host bookkeeping keys (host_keys() in _lib.lua: ready, inflight, next,
--            policy, inbox, idle)
-- KEYS[7] dead hash fp -> reason "\n" host "\n" request JSON   KEYS[8] reqs hash fp -> value
-- KEYS[9] scores hash fp -> queue score   KEYS[10] attempts hash fp -> deliveries
-- KEYS[11] stats hash counters
-- KEYS[12] strikes hash kind "\n" host -> count (revived hosts start afresh: breaker closed)
-- KEYS[13] dead_at hash fp -> Unix ms   KEYS[14] last_error hash fp -> last retry reason
-- KEYS[15..14+H] q:{host} per host in ARGV
-- ARGV[1] default concurrency  ARGV[2] H  ARGV[3..2+H] hosts  then per entry: fp, host index
-- Returns: number of requests requeued.
check_job()
local hk = host_keys()
local dead, reqs, scores, attempts, stats = KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local strikes, dead_at, last_error = KEYS[12], KEYS[13], KEYS[14]
local QUEUES = 14 -- KEYS[QUEUES + h]: host h's queue
local dconc, nhosts = tonumber(ARGV[1]), tonumber(ARGV[2])
local HOSTS = 2 -- ARGV[HOSTS + h]: host h's name
local revived, touched = 0, {}
local i = HOSTS + nhosts + 1
while i <= #ARGV do
  local fp, h = ARGV[i], tonumber(ARGV[i + 1])
  local v = redis.call("HGET", dead, fp)
  local score = redis.call("HGET", scores, fp)
  if v and score then
    local value = string.sub(v, string.find(v, "\n", 1, true) + 1)
    redis.call("HDEL", dead, fp)
    redis.call("HDEL", dead_at, fp)
    redis.call("HDEL", last_error, fp)
    redis.call("HSET", reqs, fp, value)
    redis.call("HDEL", attempts, fp)
    redis.call("ZADD", KEYS[QUEUES + h], score, fp)
    revived = revived + 1
    touched[h] = true
  end
  i = i + 2
end
if revived == 0 then return 0 end
redis.call("HINCRBY", stats, "dead", -revived)
redis.call("HINCRBY", stats, "queued", revived)
local hosts = {}
for h in pairs(touched) do host_answered(strikes, hk.policy, ARGV[HOSTS + h]) end
for h in pairs(touched) do hosts[#hosts + 1] = {ARGV[HOSTS + h], KEYS[QUEUES + h]} end
make_ready(hk, hosts, dconc, revived)
return revived
