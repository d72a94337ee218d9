-- drain_inbox.lua: take up to n inbox entries into the worker's claim list and return them.
-- If the claim list is not empty (an earlier drain of this worker was not pushed), return it
-- instead, so nothing taken from the inbox is lost; push.lua deletes the claim list.
-- An entry longer than the limit is claimed like any other (it stays whole in Redis until
-- push.lua deletes the claim) but is returned as {its length, its first sample bytes}, never
-- whole: its size is checked here, inside Redis, so a worker never reads a large entry.
-- Before these, check_job() (_lib.lua) takes KEYS[1] the job hash and ARGV[1] the job id.
-- KEYS[1] inbox list (producers LPUSH, so the oldest entry is on the right)
-- KEYS[2] claim list of this worker
-- ARGV[1] n, the most entries to take
-- ARGV[2] limit, the longest entry returned whole (bytes)
-- ARGV[3] sample, how many first bytes of a longer entry are returned (bytes)
-- Returns: the claimed entries, oldest first ("" entries are wake-up tokens); an entry over
-- the limit as an array {length in bytes (integer), its first `sample` bytes}.
check_job()
local inbox, claim = KEYS[1], KEYS[2]
local most, limit, sample = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])

local function shown(v)
  if #v > limit then return {#v, string.sub(v, 1, sample)} end
  return v
end

local out = {}
local pending = redis.call("LRANGE", claim, 0, -1)
if #pending > 0 then
  for i, v in ipairs(pending) do out[i] = shown(v) end
  return out
end
for _ = 1, most do
  local v = redis.call("RPOP", inbox)
  if not v then break end
  redis.call("RPUSH", claim, v)
  out[#out + 1] = shown(v)
end
return out
