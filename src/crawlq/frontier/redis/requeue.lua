-- requeue.lua: move entries whose time has come from a timed set back to their host queues:
-- expired leases (mode "reap": their worker died or stalled) or due retries ("promote").
-- Each entry is re-checked here, so concurrent reapers requeue it once.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] source zset fp..host -> Unix ms (leases or delayed)
-- KEYS[2] owner hash fp -> "lease_id worker"   KEYS[3] inflight hash host -> leases held
-- KEYS[4] next hash host -> next-allowed ms    KEYS[5] policy hash host -> "delay conc"
-- KEYS[6] ready zset host -> next-allowed ms   KEYS[7] stats hash counters
-- KEYS[8] scores hash fp -> queue score        KEYS[9] inbox list (wake-up tokens)
-- KEYS[10] idle zset worker -> waiting since   KEYS[11..10+H] q:{host} per host in ARGV
-- ARGV[1] now (Unix ms)  ARGV[2] mode "reap" | "promote"  ARGV[3] default concurrency
-- ARGV[4] H  ARGV[5..4+H] hosts   then per entry: member (fp..host), host index
-- Returns: number of entries requeued.
check_job()
local now, mode, dconc = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local nhosts = tonumber(ARGV[4])
local moved, touched = 0, {}
local i = 5 + nhosts
while i <= #ARGV do
  local member, h = ARGV[i], tonumber(ARGV[i + 1])
  local at = redis.call("ZSCORE", KEYS[1], member)
  if at and tonumber(at) <= now then
    local fp = string.sub(member, 1, 20)
    local host = ARGV[4 + h]
    redis.call("ZREM", KEYS[1], member)
    if mode == "reap" then
      local own = redis.call("HGET", KEYS[2], fp)
      redis.call("HDEL", KEYS[2], fp)
      if not own or string.sub(own, -1) ~= "\n" then -- "\n": its slot was freed already
        redis.call("HINCRBY", KEYS[3], host, -1)
      end
    end
    redis.call("ZADD", KEYS[10 + h], redis.call("HGET", KEYS[8], fp), fp)
    moved = moved + 1
    touched[h] = true
  end
  i = i + 2
end
if moved == 0 then return 0 end
redis.call("HINCRBY", KEYS[7], mode == "reap" and "inflight" or "delayed", -moved)
redis.call("HINCRBY", KEYS[7], "queued", moved)
local hosts = {}
for h in pairs(touched) do hosts[#hosts + 1] = {ARGV[4 + h], KEYS[10 + h]} end
local k = {ready = KEYS[6], inflight = KEYS[3], next = KEYS[4], policy = KEYS[5],
           inbox = KEYS[9], idle = KEYS[10]}
make_ready(k, hosts, dconc)
return moved
