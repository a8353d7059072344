-- wrk: like random.lua, but each connection sends BENCH_PIPELINE requests (default 16) at once
-- and reads their answers, HTTP/1.1 pipelining as some clients and proxies do it.
local ids = {}
for line in io.lines(os.getenv("BENCH_IDS") or "ids.txt") do ids[#ids + 1] = line end
math.randomseed(os.time())
local depth = tonumber(os.getenv("BENCH_PIPELINE") or "16")

request = function()
  local batch = {}
  for i = 1, depth do
    batch[i] = wrk.format("GET", "/" .. ids[math.random(#ids)])
  end
  return table.concat(batch)
end

dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")
