-- wrk: GET a random short link from ids.txt per request; prints one summary line at the end.
local ids = {}
for line in io.lines(os.getenv("BENCH_IDS") or "ids.txt") do ids[#ids + 1] = line end
math.randomseed(os.time())

request = function()
  return wrk.format("GET", "/" .. ids[math.random(#ids)])
end

dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")
