-- settle.lua: end leases (ack, retry, dead or release) and free their hosts' slots (unless
-- lease.lua freed a slot already: the owner entry then ends in "\n"). A lease that is no
-- longer held (expired and re-leased, or already settled) is skipped.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] leases zset fp..host -> deadline    KEYS[2] owner hash fp -> "lease_id worker"
-- KEYS[3] inflight hash host -> leases held   KEYS[4] next hash host -> next-allowed Unix ms
-- KEYS[5] policy hash host -> "delay conc"    KEYS[6] ready zset host -> next-allowed Unix ms
-- KEYS[7] stats hash counters                 KEYS[8] reqs hash fp -> value
-- KEYS[9] scores hash fp -> queue score       KEYS[10] attempts hash fp -> deliveries
-- KEYS[11] delayed zset fp..host -> due ms    KEYS[12] dead hash fp -> reason "\n" value
-- KEYS[13] rate hash slot -> "second count"   KEYS[14] inbox list (wake-up tokens)
-- KEYS[15] idle zset worker -> waiting since  KEYS[16] strikes hash kind "\n" host -> count
-- KEYS[17..16+H] q:{host} per host in ARGV
-- ARGV[1] now (Unix ms)  ARGV[2] mode "ack" | "retry" | "dead" | "release"
-- ARGV[3] default concurrency  ARGV[4] H  ARGV[5..4+H] hosts
-- then per lease: fp, lease_id, host index, extra (retry: due Unix ms; dead: reason; else "")
-- An ack means the host answered: its strikes in a row and breaker flags are cleared.
-- When this leaves the job drained (nothing leased, delayed or ready), idle workers get a
-- wake-up token each, so one waiting on its own last leases sees the end at once.
-- Returns: number of leases that were still held and are now settled.
check_job()
local now, mode, dconc = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local nhosts = tonumber(ARGV[4])
local settled, touched = 0, {}
local i = 5 + nhosts
while i <= #ARGV do
  local fp, lease_id, h, extra = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
  local host = ARGV[4 + h]
  local own = redis.call("HGET", KEYS[2], fp)
  if own and string.sub(own, 1, #lease_id + 1) == lease_id .. " " then
    redis.call("ZREM", KEYS[1], fp .. host)
    redis.call("HDEL", KEYS[2], fp)
    if string.sub(own, -1) ~= "\n" then redis.call("HINCRBY", KEYS[3], host, -1) end
    if mode == "ack" then
      redis.call("HDEL", KEYS[8], fp)
      redis.call("HDEL", KEYS[9], fp)
      redis.call("HDEL", KEYS[10], fp)
    elseif mode == "retry" then
      redis.call("ZADD", KEYS[11], extra, fp .. host)
    elseif mode == "dead" then
      redis.call("HSET", KEYS[12], fp, extra .. "\n" .. (redis.call("HGET", KEYS[8], fp) or ""))
      redis.call("HDEL", KEYS[8], fp)
      redis.call("HDEL", KEYS[10], fp) -- the score stays: revive.lua requeues it in place
    else -- release: back to its place in the queue, this delivery not counted
      redis.call("ZADD", KEYS[16 + h], redis.call("HGET", KEYS[9], fp), fp)
      redis.call("HINCRBY", KEYS[10], fp, -1)
    end
    settled = settled + 1
    touched[h] = true
  end
  i = i + 4
end
if settled == 0 then return 0 end
redis.call("HINCRBY", KEYS[7], "inflight", -settled)
local counter = ({ack = "done", retry = "delayed", dead = "dead", release = "queued"})[mode]
redis.call("HINCRBY", KEYS[7], counter, settled)
if mode == "retry" then redis.call("HINCRBY", KEYS[7], "retries", settled) end
if mode == "ack" then
  local sec = math.floor(now / 1000)
  local slot = tostring(sec % 120)
  local cur = redis.call("HGET", KEYS[13], slot)
  local count = settled
  if cur then
    local s, c = string.match(cur, "^(%d+) (%d+)$")
    if tonumber(s) == sec then count = count + tonumber(c) end
  end
  redis.call("HSET", KEYS[13], slot, sec .. " " .. count)
end
local hosts = {}
for h in pairs(touched) do hosts[#hosts + 1] = {ARGV[4 + h], KEYS[16 + h]} end
local k = {ready = KEYS[6], inflight = KEYS[3], next = KEYS[4], policy = KEYS[5],
           inbox = KEYS[14], idle = KEYS[15]}
if mode == "ack" then
  for h in pairs(touched) do host_answered(KEYS[16], KEYS[5], ARGV[4 + h]) end
end
if make_ready(k, hosts, dconc) == 0 and redis.call("ZCARD", KEYS[1]) == 0
    and redis.call("ZCARD", KEYS[11]) == 0 and redis.call("ZCARD", KEYS[6]) == 0 then
  for _ = 1, math.min(redis.call("ZCARD", KEYS[15]), 64) do redis.call("LPUSH", KEYS[14], "") end
end
return settled
