-- wrk: GET a random short link from ids.txt per request; prints one summary line at the end.
local ids = {}
for line in io.lines(os.getenv("BENCH_IDS") or "ids.txt") do ids[#ids + 1] = line end
math.randomseed(os.time())

request = function()
  return wrk.format("GET", "/" .. ids[math.random(#ids)])
end

done = function(summary, latency, requests)
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.status + summary.errors.timeout
  io.write(string.format("RESULT requests=%d seconds=%.3f rps=%.1f p50_us=%d p99_us=%d errors=%d\n",
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), errors))
end
