#!lua flags=allow-oom
-- allow-oom (see scripts.py): moves expired leases and due retries back to their queues.
-- requeue.lua: move entries whose time has come from a timed set back to their host queues:
-- expired leases (mode "reap": their worker died or stalled) or due retries ("promote").
-- Each entry is re-checked here, so concurrent reapers requeue it once.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1..6] the host bookkeeping keys (host_keys() in _lib.lua: ready, inflight, next,
--            policy, inbox, idle)
-- KEYS[7] source zset fp..host -> Unix ms (leases or delayed)
-- KEYS[8] owner hash fp -> "lease_id worker"   KEYS[9] stats hash counters
-- KEYS[10] reqs hash fp -> score "\n" JSON     KEYS[11..10+H] q:{host} per host in ARGV
-- ARGV[1] now (Unix ms)  ARGV[2] mode "reap" | "promote"  ARGV[3] default concurrency
-- ARGV[4] H  ARGV[5..4+H] hosts   then per entry: member (fp..host), host index
-- Returns: number of entries requeued.
check_job()
local hk = host_keys()
local source, owner, stats, reqs = KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local QUEUES = 10 -- KEYS[QUEUES + h]: host h's queue
local now, mode, dconc = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local nhosts = tonumber(ARGV[4])
local HOSTS = 4 -- ARGV[HOSTS + h]: host h's name
local moved, touched = 0, {}
local i = HOSTS + nhosts + 1
while i <= #ARGV do
  local member, h = ARGV[i], tonumber(ARGV[i + 1])
  local at = redis.call("ZSCORE", source, member)
  if at and tonumber(at) <= now then
    local fp = string.sub(member, 1, 20)
    local host = ARGV[HOSTS + h]
    redis.call("ZREM", source, member)
    if mode == "reap" then
      local own = redis.call("HGET", owner, fp)
      redis.call("HDEL", owner, fp)
      if not own or string.sub(own, -1) ~= "\n" then -- "\n": its slot was freed already
        redis.call("HINCRBY", hk.inflight, host, -1)
      end
    end
    redis.call("ZADD", KEYS[QUEUES + h], record_score(redis.call("HGET", reqs, fp)), fp)
    moved = moved + 1
    touched[h] = true
  end
  i = i + 2
end
if moved == 0 then return 0 end
redis.call("HINCRBY", stats, mode == "reap" and "inflight" or "delayed", -moved)
redis.call("HINCRBY", stats, "queued", moved)
local hosts = {}
for h in pairs(touched) do hosts[#hosts + 1] = {ARGV[HOSTS + h], KEYS[QUEUES + h]} end
make_ready(hk, hosts, dconc)
return moved
