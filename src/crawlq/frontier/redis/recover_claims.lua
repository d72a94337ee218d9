-- recover_claims.lua: give the inbox claims of dead workers back to the inbox.
-- A worker is dead when its heartbeat is older than the staleness limit (or absent).
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] workers zset worker -> last heartbeat Unix ms   KEYS[2] inbox list
-- KEYS[3..2+W] claim lists, one per worker named in ARGV
-- ARGV[1] now (Unix ms)  ARGV[2] staleness limit (ms)  ARGV[3..2+W] worker ids
-- Returns: number of entries returned to the inbox.
check_job()
local now, stale = tonumber(ARGV[1]), tonumber(ARGV[2])
local moved = 0
for w = 3, #ARGV do
  local beat = redis.call("ZSCORE", KEYS[1], ARGV[w])
  if not beat or tonumber(beat) < now - stale then
    local claim = KEYS[w]
    local v = redis.call("RPOP", claim)
    while v do
      redis.call("RPUSH", KEYS[2], v) -- to the consumer end: taken next
      moved = moved + 1
      v = redis.call("RPOP", claim)
    end
    redis.call("ZREM", KEYS[1], ARGV[w])
  end
end
return moved
