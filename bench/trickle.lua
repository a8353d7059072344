-- wrk: random short links from BENCH_IDS, each connection waiting BENCH_DELAY_MS (default 10)
-- between requests: a steady low load. Prints one summary line at the end.
local ids = {}
for line in io.lines(os.getenv("BENCH_IDS") or "ids.txt") do ids[#ids + 1] = line end
local pause = tonumber(os.getenv("BENCH_DELAY_MS") or "10")
math.randomseed(os.time())

request = function()
  return wrk.format("GET", "/" .. ids[math.random(#ids)])
end

delay = function()
  return pause
end

dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")
