-- wrk: GET a random short link from BENCH_IDS per request with a User-Agent never sent before
-- (400 random printable bytes) and a random client address of bench-geoip's networks (through
-- X-Forwarded-For, which the bench's couchlink believes from loopback): the worst a client can
-- do to a link's rules. Prints one summary line at the end.
local ids = {}
for line in io.lines(os.getenv("BENCH_IDS") or "ids.txt") do ids[#ids + 1] = line end
math.randomseed(os.time())
local chars = {}
for c = 33, 126 do chars[#chars + 1] = string.char(c) end

request = function()
  local ua = {}
  for i = 1, 400 do ua[i] = chars[math.random(#chars)] end
  local from = string.format("%d.%d.%d.%d", 2 * math.random(1, 100), math.random(0, 255), math.random(0, 255), math.random(1, 254))
  return wrk.format("GET", "/" .. ids[math.random(#ids)],
    {["User-Agent"] = table.concat(ua), ["Accept-Language"] = "fr-FR,fr;q=0.9", ["X-Forwarded-For"] = from})
end

dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")
