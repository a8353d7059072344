-- wrk: bench/visitors.lua's five real browsers, each from a random address of bench-geoip's
-- networks (through X-Forwarded-For, believed from loopback), so that every rule, country
-- included, is decided per request. Prints one summary line at the end.
local ids = {}
for line in io.lines(os.getenv("BENCH_IDS") or "ids.txt") do ids[#ids + 1] = line end
local visitors = {
  {"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "en-US,en;q=0.9"},
  {"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36", "de-DE,de;q=0.9,en;q=0.8"},
  {"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36", "fr-FR,fr;q=0.9,en;q=0.8"},
  {"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15", "en-GB,en;q=0.9"},
  {"Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "it"},
}
math.randomseed(os.time())

request = function()
  local v = visitors[math.random(#visitors)]
  local from = string.format("%d.%d.%d.%d", 2 * math.random(1, 100), math.random(0, 255), math.random(0, 255), math.random(1, 254))
  return wrk.format("GET", "/" .. ids[math.random(#ids)],
    {["User-Agent"] = v[1], ["Accept-Language"] = v[2], ["X-Forwarded-For"] = from})
end

dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")
