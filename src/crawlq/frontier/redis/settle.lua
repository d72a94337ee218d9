#!lua flags=allow-oom
-- allow-oom (see scripts.py): deletes or moves the entries of settled leases.
-- settle.lua: end leases (ack, retry, dead or release) and free their hosts' slots (unless
-- lease.lua freed a slot already: the owner entry then ends in "\n"). A lease that is no
-- longer held (expired and re-leased, or already settled) is skipped.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1..6] the host bookkeeping keys (host_keys() in _lib.lua: ready, inflight, next,
--            policy, inbox, idle)
-- KEYS[7] leases zset fp..host -> deadline      KEYS[8] owner hash fp -> "lease_id worker"
-- KEYS[9] stats hash counters                   KEYS[10] reqs hash fp -> score "\n" JSON
-- KEYS[11] attempts hash fp -> deliveries       KEYS[12] delayed zset fp..host -> due ms
-- KEYS[13] dead hash fp -> reason "\n" record   KEYS[14] rate hash slot -> "second count"
-- KEYS[15] strikes hash kind "\n" host -> count KEYS[16] last_error hash fp -> last retry reason
-- KEYS[17] dead_at hash fp -> Unix ms           KEYS[18..17+H] q:{host} per host in ARGV
-- ARGV[1] now (Unix ms)  ARGV[2] mode "ack" | "retry" | "dead" | "release"
-- ARGV[3] default concurrency  ARGV[4] H  ARGV[5..4+H] hosts
-- then per lease: fp, lease_id, host index, extra (retry: due Unix ms, a space and the
-- reason; dead: reason; else "")
-- A dead letter keeps its record (with its score) and attempts, and gets its time in dead_at,
-- until replayed.
-- An ack means the host answered: its strikes in a row and breaker flags are cleared.
-- When this leaves the job drained (nothing leased, delayed or ready), idle workers get a
-- wake-up token each, so one waiting on its own last leases sees the end at once.
-- Returns: number of leases that were still held and are now settled.
check_job()
local hk = host_keys()
local leases, owner, stats, reqs = KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local attempts, delayed, dead, rate = KEYS[11], KEYS[12], KEYS[13], KEYS[14]
local strikes, last_error, dead_at = KEYS[15], KEYS[16], KEYS[17]
local QUEUES = 17 -- KEYS[QUEUES + h]: host h's queue
local now, mode, dconc = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local nhosts = tonumber(ARGV[4])
local HOSTS = 4 -- ARGV[HOSTS + h]: host h's name
local settled, touched = 0, {}
local i = HOSTS + nhosts + 1
while i <= #ARGV do
  local fp, lease_id, h, extra = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
  local host = ARGV[HOSTS + h]
  local own = redis.call("HGET", owner, fp)
  if own and string.sub(own, 1, #lease_id + 1) == lease_id .. " " then
    redis.call("ZREM", leases, fp .. host)
    redis.call("HDEL", owner, fp)
    if string.sub(own, -1) ~= "\n" then redis.call("HINCRBY", hk.inflight, host, -1) end
    if mode == "ack" then
      redis.call("HDEL", reqs, fp)
      redis.call("HDEL", attempts, fp)
      redis.call("HDEL", last_error, fp)
    elseif mode == "retry" then
      local due_ms, why = string.match(extra, "^(%d+) ?(.*)$")
      redis.call("ZADD", delayed, due_ms, fp .. host)
      if why ~= "" then redis.call("HSET", last_error, fp, why) end
    elseif mode == "dead" then
      redis.call("HSET", dead, fp, extra .. "\n" .. (redis.call("HGET", reqs, fp) or ""))
      redis.call("HSET", dead_at, fp, now)
      redis.call("HDEL", reqs, fp)
      redis.call("HDEL", last_error, fp) -- the record keeps its score, attempts stay: see revive.lua
    else -- release: back to its place in the queue, this delivery not counted
      redis.call("ZADD", KEYS[QUEUES + h], record_score(redis.call("HGET", reqs, fp)), fp)
      redis.call("HINCRBY", attempts, fp, -1)
    end
    settled = settled + 1
    touched[h] = true
  end
  i = i + 4
end
if settled == 0 then return 0 end
redis.call("HINCRBY", stats, "inflight", -settled)
local counter = ({ack = "done", retry = "delayed", dead = "dead", release = "queued"})[mode]
redis.call("HINCRBY", stats, counter, settled)
if mode == "retry" then redis.call("HINCRBY", stats, "retries", settled) end
if mode == "ack" then
  local sec = math.floor(now / 1000)
  local slot = tostring(sec % 120)
  local cur = redis.call("HGET", rate, slot)
  local count = settled
  if cur then
    local s, c = string.match(cur, "^(%d+) (%d+)$")
    if tonumber(s) == sec then count = count + tonumber(c) end
  end
  redis.call("HSET", rate, slot, sec .. " " .. count)
end
local hosts = {}
for h in pairs(touched) do hosts[#hosts + 1] = {ARGV[HOSTS + h], KEYS[QUEUES + h]} end
if mode == "ack" then
  for h in pairs(touched) do host_answered(strikes, hk.policy, ARGV[HOSTS + h]) end
end
if make_ready(hk, hosts, dconc) == 0 and redis.call("ZCARD", leases) == 0
    and redis.call("ZCARD", delayed) == 0 and redis.call("ZCARD", hk.ready) == 0 then
  for _ = 1, math.min(redis.call("ZCARD", hk.idle), 64) do redis.call("LPUSH", hk.inbox, "") end
end
return settled
