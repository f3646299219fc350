-- wrk script: replays a request log (one path per line, bench/lib/sitegen.py).
-- usage: wrk ... -s bench/lib/replay.lua http://HOST/ -- LOG START CLOSE
-- Thread t starts at line START + t * 100003 (mod lines); every request a
-- connection of the thread makes takes the thread's next line, wrapping at
-- the end: the log in order, served concurrently. CLOSE = 1 adds
-- "Connection: close" (one request per connection; wrk reconnects).
local threads = 0

function setup(thread)
   thread:set("tid", threads)
   threads = threads + 1
end

local paths = {}
local idx = 1
local headers = {}

function init(args)
   local f = assert(io.open(args[1], "r"))
   for line in f:lines() do
      paths[#paths + 1] = line
   end
   f:close()
   assert(#paths > 0, "empty request log " .. args[1])
   local start = tonumber(args[2]) or 0
   -- Threads apart by a fixed stride (a prime): their streams do not
   -- overlap for the first 100003 requests.
   idx = ((start + tid * 100003) % #paths) + 1
   if args[3] == "1" then
      headers["Connection"] = "close"
   end
end

function request()
   local p = paths[idx]
   idx = idx % #paths + 1
   return wrk.format("GET", p, headers)
end
