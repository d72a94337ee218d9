-- lease.lua: first give back the host slots of the caller's leases whose requests are done
-- (their owner entries get a trailing "\n"; the leases stay held), then claim up to n ready
-- requests among the candidate hosts, highest priority first, moving each host's
-- next-allowed time and in-flight count in the same step.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] ready  zset host -> next-allowed Unix ms    KEYS[2] reqs     hash fp -> value
-- KEYS[3] attempts hash fp -> deliveries              KEYS[4] leases   zset fp..host -> deadline
-- KEYS[5] owner  hash fp -> "lease_id worker"         KEYS[6] inflight hash host -> leases held
-- KEYS[7] next   hash host -> next-allowed Unix ms    KEYS[8] policy   hash host -> "delay conc"
-- KEYS[9] stats  hash counters                        KEYS[10] inbox list (wake-up tokens)
-- KEYS[11] idle  zset worker -> waiting since         KEYS[12..11+H] q:{host} of each candidate
-- ARGV[1] now (Unix ms)  ARGV[2] n  ARGV[3] visibility timeout (ms)  ARGV[4] worker id
-- ARGV[5] default delay (ms)  ARGV[6] default concurrency  ARGV[7] H  ARGV[8..7+H] hosts
-- ARGV[8+H] F, then F triples: fingerprint, lease id, host index of a lease whose request is
-- done (its host is among the H candidates)
-- A host marked down (policy flag "d", see strike.lua) is drained: up to n of its requests are
-- leased at once, whatever its politeness, flagged so that the worker dead-letters them.
-- A paused job (field "paused" of the job hash, `crawlq job pause`) gives back done slots and
-- leases nothing: the reply is {"paused"}.
-- Returns: flat array fp, lease_id, attempt, value, down ("1" | "0"), ... (empty: nothing
-- ready now).
local job_key = check_job()
local now, n, vt = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local worker, ddelay, dconc = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local nhosts = tonumber(ARGV[7])
local base = 8 + nhosts
local freed = {}
for f = 0, tonumber(ARGV[base]) - 1 do
  local fp, lease_id, h = ARGV[base + 1 + 3 * f], ARGV[base + 2 + 3 * f], ARGV[base + 3 + 3 * f]
  local own = redis.call("HGET", KEYS[5], fp)
  if own and string.sub(own, -1) ~= "\n" and string.sub(own, 1, #lease_id + 1) == lease_id .. " " then
    redis.call("HSET", KEYS[5], fp, own .. "\n")
    redis.call("HINCRBY", KEYS[6], ARGV[7 + tonumber(h)], -1)
    freed[tonumber(h)] = true
  end
end
if next(freed) then
  local hosts = {}
  for h in pairs(freed) do hosts[#hosts + 1] = {ARGV[7 + h], KEYS[11 + h]} end
  local k = {ready = KEYS[1], inflight = KEYS[6], next = KEYS[7], policy = KEYS[8],
             inbox = KEYS[10], idle = KEYS[11]}
  make_ready(k, hosts, dconc)
end
if redis.call("HEXISTS", job_key, "paused") == 1 then return {"paused"} end
local cands, info = {}, {}
for h = 1, nhosts do
  local host = ARGV[7 + h]
  local at = redis.call("ZSCORE", KEYS[1], host)
  if at and tonumber(at) <= now then
    local delay, conc, flags = host_policy(KEYS[8], host, ddelay, dconc)
    local down = flags == "d"
    if down then delay, conc = 0, math.huge end
    local inflight = tonumber(redis.call("HGET", KEYS[6], host) or "0")
    local free = conc - inflight
    local items = {}
    if free > 0 then
      local take = math.min(n, free)
      if delay > 0 then take = 1 end
      items = redis.call("ZRANGE", KEYS[11 + h], 0, take - 1, "WITHSCORES")
    end
    if #items == 0 then
      redis.call("ZREM", KEYS[1], host) -- full or empty: not ready (settle/push re-adds it)
    else
      info[h] = {host = host, delay = delay, conc = conc, inflight = inflight, taken = 0,
                 down = down and "1" or "0"}
      for j = 1, #items, 2 do
        cands[#cands + 1] = {tonumber(items[j + 1]), items[j], h}
      end
    end
  end
end
table.sort(cands, function(a, b) return a[1] < b[1] end)
local out, total = {}, 0
local deadline = now + vt
for c = 1, math.min(n, #cands) do
  local fp, h = cands[c][2], cands[c][3]
  local host = info[h].host
  redis.call("ZREM", KEYS[11 + h], fp)
  local attempt = redis.call("HINCRBY", KEYS[3], fp, 1)
  local lease_id = tostring(redis.call("HINCRBY", KEYS[9], "lease_seq", 1))
  redis.call("ZADD", KEYS[4], deadline, fp .. host)
  redis.call("HSET", KEYS[5], fp, lease_id .. " " .. worker)
  out[#out + 1] = fp
  out[#out + 1] = lease_id
  out[#out + 1] = attempt
  out[#out + 1] = redis.call("HGET", KEYS[2], fp)
  out[#out + 1] = info[h].down
  info[h].taken = info[h].taken + 1
  total = total + 1
end
for h, hi in pairs(info) do
  if hi.taken > 0 then
    local inflight = redis.call("HINCRBY", KEYS[6], hi.host, hi.taken)
    local nxt = now + hi.delay
    redis.call("HSET", KEYS[7], hi.host, nxt)
    if inflight >= hi.conc or redis.call("ZCARD", KEYS[11 + h]) == 0 then
      redis.call("ZREM", KEYS[1], hi.host)
    elseif hi.delay > 0 then
      redis.call("ZADD", KEYS[1], nxt, hi.host)
    end -- with no delay the host stays ready as it was: another worker whose "now" is a
        -- moment older than ours must still see it ready
  end
end
if total > 0 then
  redis.call("HINCRBY", KEYS[9], "queued", -total)
  redis.call("HINCRBY", KEYS[9], "inflight", total)
end
return out
