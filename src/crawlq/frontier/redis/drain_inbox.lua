-- drain_inbox.lua: take up to n inbox entries into the worker's claim list and return them.
-- If the claim list is not empty (an earlier drain of this worker was not pushed), return it
-- instead, so nothing taken from the inbox is lost; push.lua deletes the claim list.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] inbox list (producers LPUSH, so the oldest entry is on the right)
-- KEYS[2] claim list of this worker
-- ARGV[1] n, the most entries to take
-- Returns: the claimed entries, oldest first ("" entries are wake-up tokens).
check_job()
local inbox, claim = KEYS[1], KEYS[2]
local most = tonumber(ARGV[1])
local pending = redis.call("LRANGE", claim, 0, -1)
if #pending > 0 then return pending end
local out = {}
for _ = 1, most do
  local v = redis.call("RPOP", inbox)
  if not v then break end
  redis.call("RPUSH", claim, v)
  out[#out + 1] = v
end
return out
