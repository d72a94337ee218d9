#!lua flags=allow-oom
-- allow-oom (see scripts.py): moves dead workers' claims back to the inbox.
-- recover_claims.lua: give the inbox claims of dead workers back to the inbox.
-- A worker is dead when its heartbeat is older than the staleness limit (or absent).
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] workers zset worker -> last heartbeat Unix ms   KEYS[2] inbox list
-- KEYS[3..2+W] claim lists, one per worker named in ARGV
-- ARGV[1] now (Unix ms)  ARGV[2] staleness limit (ms)  ARGV[3..2+W] worker ids
-- Returns: number of entries returned to the inbox.
check_job()
local workers, inbox = KEYS[1], KEYS[2]
local CLAIMS = 2 -- KEYS[CLAIMS + w]: worker w's claim list
local now, stale = tonumber(ARGV[1]), tonumber(ARGV[2])
local WORKERS = 2 -- ARGV[WORKERS + w]: worker w's id
local moved = 0
for w = 1, #ARGV - WORKERS do
  local worker = ARGV[WORKERS + w]
  local beat = redis.call("ZSCORE", workers, worker)
  if not beat or tonumber(beat) < now - stale then
    local claim = KEYS[CLAIMS + w]
    local v = redis.call("RPOP", claim)
    while v do
      redis.call("RPUSH", inbox, v) -- to the consumer end: taken next
      moved = moved + 1
      v = redis.call("RPOP", claim)
    end
    redis.call("ZREM", workers, worker)
  end
end
return moved
