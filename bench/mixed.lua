-- wrk: a mix of visitors for the live counts: a random short link from BENCH_IDS (one request
-- in twenty a 404: an ID no link has, or a path that is none), as a browser or a bot or no
-- User-Agent at all, new (no cookie) or returning (a tracking ID issued long ago); prints one
-- summary line at the end.
local ids = {}
for line in io.lines(os.getenv("BENCH_IDS") or "ids.txt") do ids[#ids + 1] = line end
local agents = {
  "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
  "Googlebot/2.1 (+http://www.google.com/bot.html)",
  "curl/8.5.0",
  false,  -- no User-Agent at all (a bot, by the report's rule)
}
local returning = {
  "20260101000000a3f9c1e2b7d4e601", "20260102101010b3f9c1e2b7d4e602", "20260315121212c3f9c1e2b7d4e603",
}
math.randomseed(os.time())

request = function()
  local path = "/" .. ids[math.random(#ids)]
  local r = math.random(20)
  if r == 1 then path = "/Zz" .. math.random(100, 999) elseif r == 2 then path = "/favicon.ico" end
  local headers = {}
  local agent = agents[math.random(#agents)]
  if agent then headers["User-Agent"] = agent end
  if math.random(2) == 1 then headers["Cookie"] = "tid=" .. returning[math.random(#returning)] end
  return wrk.format("GET", path, headers)
end

dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")
