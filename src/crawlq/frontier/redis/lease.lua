#!lua flags=allow-oom
-- allow-oom (see scripts.py): moves queued requests to leases: a Redis at its maxmemory drains itself.
-- lease.lua: first give back the host slots of the caller's leases whose requests are done
-- (their owner entries get a trailing "\n"; the leases stay held), then claim up to n ready
-- requests among the candidate hosts, highest priority first, moving each host's
-- next-allowed time and in-flight count in the same step.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1..6] the host bookkeeping keys (host_keys() in _lib.lua: ready, inflight, next,
--            policy, inbox, idle)
-- KEYS[7] reqs     hash fp -> score "\n" request JSON  KEYS[8] attempts hash fp -> deliveries
-- KEYS[9] leases   zset fp..host -> deadline Unix ms   KEYS[10] owner hash fp -> "lease_id worker"
-- KEYS[11] stats   hash counters                       KEYS[12..11+H] q:{host} of each candidate
-- ARGV[1] now (Unix ms)  ARGV[2] n  ARGV[3] visibility timeout (ms)  ARGV[4] worker id
-- ARGV[5] default delay (ms)  ARGV[6] default concurrency  ARGV[7] H  ARGV[8..7+H] hosts
-- ARGV[8+H] F, then F triples: fingerprint, lease id, host index of a lease whose request is
-- done (its host is among the H candidates)
-- A host marked down (policy flag "d", see strike.lua) is drained: up to n of its requests are
-- leased at once, whatever its politeness, flagged so that the worker dead-letters them.
-- A paused job (field "paused" of the job hash, `crawlq job pause`) gives back done slots and
-- leases nothing: the reply is {"paused"}.
-- Returns: flat array fp, lease_id, attempt, record (score "\n" request JSON), down ("1" | "0"), host (the queue it
-- came from), ... (empty: nothing ready now).
local job_key = check_job()
local hk = host_keys()
local reqs, attempts, leases, owner, stats = KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local QUEUES = 11 -- KEYS[QUEUES + h]: candidate host h's queue
local now, n, vt = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local worker, ddelay, dconc = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local nhosts = tonumber(ARGV[7])
local HOSTS = 7 -- ARGV[HOSTS + h]: candidate host h's name
local DONE = 8 + nhosts -- ARGV[DONE]: F, then the done triples

local freed = {}
for f = 0, tonumber(ARGV[DONE]) - 1 do
  local fp, lease_id, h = ARGV[DONE + 1 + 3 * f], ARGV[DONE + 2 + 3 * f], ARGV[DONE + 3 + 3 * f]
  local own = redis.call("HGET", owner, fp)
  if own and string.sub(own, -1) ~= "\n" and string.sub(own, 1, #lease_id + 1) == lease_id .. " " then
    redis.call("HSET", owner, fp, own .. "\n")
    redis.call("HINCRBY", hk.inflight, ARGV[HOSTS + tonumber(h)], -1)
    freed[tonumber(h)] = true
  end
end
if next(freed) then
  local hosts = {}
  for h in pairs(freed) do hosts[#hosts + 1] = {ARGV[HOSTS + h], KEYS[QUEUES + h]} end
  make_ready(hk, hosts, dconc)
end
if redis.call("HEXISTS", job_key, "paused") == 1 then return {"paused"} end
local cands, info = {}, {}
for h = 1, nhosts do
  local host = ARGV[HOSTS + h]
  local at = redis.call("ZSCORE", hk.ready, host)
  if at and tonumber(at) <= now then
    local delay, conc, flags = host_policy(hk.policy, host, ddelay, dconc)
    local down = flags == "d"
    if down then delay, conc = 0, math.huge end
    local inflight = tonumber(redis.call("HGET", hk.inflight, host) or "0")
    local free = conc - inflight
    local items = {}
    if free > 0 then
      local take = math.min(n, free)
      if delay > 0 then take = 1 end
      items = redis.call("ZRANGE", KEYS[QUEUES + h], 0, take - 1, "WITHSCORES")
    end
    if #items == 0 then
      redis.call("ZREM", hk.ready, host) -- full or empty: not ready (settle/push re-adds it)
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
  redis.call("ZREM", KEYS[QUEUES + h], fp)
  local attempt = redis.call("HINCRBY", attempts, fp, 1)
  local lease_id = tostring(redis.call("HINCRBY", stats, "lease_seq", 1))
  redis.call("ZADD", leases, deadline, fp .. host)
  redis.call("HSET", owner, fp, lease_id .. " " .. worker)
  out[#out + 1] = fp
  out[#out + 1] = lease_id
  out[#out + 1] = attempt
  out[#out + 1] = redis.call("HGET", reqs, fp)
  out[#out + 1] = info[h].down
  out[#out + 1] = host
  info[h].taken = info[h].taken + 1
  total = total + 1
end
for h, hi in pairs(info) do
  if hi.taken > 0 then
    local inflight = redis.call("HINCRBY", hk.inflight, hi.host, hi.taken)
    local nxt = now + hi.delay
    redis.call("HSET", hk.next, hi.host, nxt)
    if inflight >= hi.conc or redis.call("ZCARD", KEYS[QUEUES + h]) == 0 then
      redis.call("ZREM", hk.ready, hi.host)
    elseif hi.delay > 0 then
      redis.call("ZADD", hk.ready, nxt, hi.host)
    end -- with no delay the host stays ready as it was: another worker whose "now" is a
        -- moment older than ours must still see it ready
  end
end
if total > 0 then
  redis.call("HINCRBY", stats, "queued", -total)
  redis.call("HINCRBY", stats, "inflight", total)
end
return out
