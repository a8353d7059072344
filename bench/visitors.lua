-- wrk: GET a random short link from BENCH_IDS per request, as a random one of a few real
-- browsers (User-Agent and Accept-Language), so that links' targets are decided per request;
-- prints one summary line at the end.
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

-- BENCH_FORWARDED=1: each request from a random address of bench-geoip's networks, through
-- X-Forwarded-For (for a couchlink that believes loopback), so that country rules are decided too.
local forwarded = os.getenv("BENCH_FORWARDED") == "1"

request = function()
  local v = visitors[math.random(#visitors)]
  local headers = {["User-Agent"] = v[1], ["Accept-Language"] = v[2]}
  if forwarded then
    headers["X-Forwarded-For"] = string.format("%d.%d.%d.%d", 2 * math.random(1, 100), math.random(0, 255),
      math.random(0, 255), math.random(1, 254))
  end
  return wrk.format("GET", "/" .. ids[math.random(#ids)], headers)
end

dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")
