-- revive.lua: put dead-lettered requests back in their host queues, attempts counted afresh.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] dead hash fp -> reason "\n" host "\n" request JSON   KEYS[2] reqs hash fp -> value
-- KEYS[3] scores hash fp -> queue score   KEYS[4] attempts hash fp -> deliveries
-- KEYS[5] stats hash counters   KEYS[6] ready zset   KEYS[7] inflight hash   KEYS[8] next hash
-- KEYS[9] policy hash   KEYS[10] inbox list (wake-up tokens)   KEYS[11] idle zset
-- KEYS[12] strikes hash kind "\n" host -> count (revived hosts start afresh: breaker closed)
-- KEYS[13..12+H] q:{host} per host in ARGV
-- ARGV[1] default concurrency  ARGV[2] H  ARGV[3..2+H] hosts  then per entry: fp, host index
-- Returns: number of requests requeued.
check_job()
local dconc, nhosts = tonumber(ARGV[1]), tonumber(ARGV[2])
local revived, touched = 0, {}
local i = 3 + nhosts
while i <= #ARGV do
  local fp, h = ARGV[i], tonumber(ARGV[i + 1])
  local v = redis.call("HGET", KEYS[1], fp)
  local score = redis.call("HGET", KEYS[3], fp)
  if v and score then
    local value = string.sub(v, string.find(v, "\n", 1, true) + 1)
    redis.call("HDEL", KEYS[1], fp)
    redis.call("HSET", KEYS[2], fp, value)
    redis.call("HDEL", KEYS[4], fp)
    redis.call("ZADD", KEYS[12 + h], score, fp)
    revived = revived + 1
    touched[h] = true
  end
  i = i + 2
end
if revived == 0 then return 0 end
redis.call("HINCRBY", KEYS[5], "dead", -revived)
redis.call("HINCRBY", KEYS[5], "queued", revived)
local hosts = {}
for h in pairs(touched) do host_answered(KEYS[12], KEYS[9], ARGV[2 + h]) end
for h in pairs(touched) do hosts[#hosts + 1] = {ARGV[2 + h], KEYS[12 + h]} end
local k = {ready = KEYS[6], inflight = KEYS[7], next = KEYS[8], policy = KEYS[9],
           inbox = KEYS[10], idle = KEYS[11]}
make_ready(k, hosts, dconc, revived)
return revived
