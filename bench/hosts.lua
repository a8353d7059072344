-- wrk: GET a random short link from ids.txt on a random host of BENCH_HOSTS (comma-separated)
-- per request: requests spread over several short domains.
local ids = {}
for line in io.lines(os.getenv("BENCH_IDS") or "ids.txt") do ids[#ids + 1] = line end
local hosts = {}
for host in string.gmatch(os.getenv("BENCH_HOSTS") or "localhost", "[^,]+") do hosts[#hosts + 1] = host end
math.randomseed(os.time())

request = function()
  return wrk.format("GET", "/" .. ids[math.random(#ids)], { Host = hosts[math.random(#hosts)] })
end

dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")
