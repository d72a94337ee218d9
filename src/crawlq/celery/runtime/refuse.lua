-- refuse.lua: Celery engine. A worker refused the job's tasks (its store, spider or a setting
-- differs from the job's): record why, count the refusal of each URL, and dead-letter the URLs
-- refused `limit` times as worker_refused, so that they are never sent again forever.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] refusals      hash  worker -> JSON of its last refusal (at most ARGV[5] workers)
-- KEYS[2] refused       hash  fingerprint -> refusals of its task so far
-- KEYS[3] refused_dead  hash  fingerprint -> JSON of its worker_refused dead letter, until a
--                             crawl writes it to the store
-- KEYS[4] seen          set   fingerprints ever admitted
-- KEYS[5] pending       hash  fingerprint -> owner "\n" request JSON, until settled
-- KEYS[6] pending_at    zset  pending fingerprint -> due Unix ms
-- KEYS[7] stats         hash  counters: seen, dead, refused (task deliveries refused), and the
--                             run counter of these dead letters, "run:dead\nworker_refused"
-- KEYS[8] dead_requests hash  fingerprint -> owner "\n" request JSON of a dead-lettered URL
-- ARGV[1] worker name; ARGV[2] its refusal record (JSON); ARGV[3] limit (>= 1)
-- ARGV[4] most workers kept in `refusals`
-- ARGV[5..] triples: fingerprint, request JSON, dead-letter JSON
-- Returns: array, one per triple: 0 send it again, 1 dead-lettered now, 2 already settled
-- (another worker stored its outcome: drop it).
check_job()
local refusals, refused, refused_dead = KEYS[1], KEYS[2], KEYS[3]
local seen, pending, pending_at, stats, dead_requests = KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local worker, limit, most = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call("HSET", refusals, worker, ARGV[2])
if redis.call("HLEN", refusals) > most then
  for _, other in ipairs(redis.call("HKEYS", refusals)) do
    if other ~= worker then redis.call("HDEL", refusals, other) break end
  end
end
local out, dead = {}, 0
for i = 5, #ARGV, 3 do
  local fp = ARGV[i]
  local owner = redis.call("HGET", pending, fp)
  if not owner and redis.call("SISMEMBER", seen, fp) == 1 then
    out[#out + 1] = 2
  else
    redis.call("HINCRBY", stats, "refused", 1)
    local n = redis.call("HINCRBY", refused, fp, 1)
    if n < limit then
      out[#out + 1] = 0
    else
      if owner then
        redis.call("HDEL", pending, fp)
        redis.call("ZREM", pending_at, fp)
        redis.call("HSET", dead_requests, fp, owner)
      else -- a scrape.delay task never admitted: it is seen now, and dead
        redis.call("SADD", seen, fp)
        redis.call("HINCRBY", stats, "seen", 1)
        redis.call("HSET", dead_requests, fp, "task\n" .. ARGV[i + 1])
      end
      redis.call("HDEL", refused, fp)
      redis.call("HSET", refused_dead, fp, ARGV[i + 2])
      dead = dead + 1
      out[#out + 1] = 1
    end
  end
end
if dead > 0 then
  redis.call("HINCRBY", stats, "dead", dead)
  redis.call("HINCRBY", stats, "run:dead\nworker_refused", dead)
end
return out
