-- robots_get.lua: read one origin's robots.txt record unless it is too large to be one.
-- KEYS[1] robots hash origin -> record
-- ARGV[1] origin  ARGV[2] largest record accepted (bytes)
-- Returns: the record; false (nil) when there is none; the integer length when it is larger
-- than ARGV[2] (not sent: anything in Redis may have been written by someone else).
local robots = KEYS[1]
local origin, most_bytes = ARGV[1], tonumber(ARGV[2])
local n = redis.call("HSTRLEN", robots, origin)
if n > most_bytes then return n end
return redis.call("HGET", robots, origin)
