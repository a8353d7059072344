-- wrk: GET each ID of ids.txt once, in order, threads taking interleaved slices, so that no
-- ID is asked twice (every request to couchlink is a cache miss). BENCH_PREFIX goes before
-- the ID (e.g. "/links" to ask CouchDB itself), BENCH_AUTH is sent as Authorization.
local ids = {}
for line in io.lines(os.getenv("BENCH_IDS") or "ids.txt") do ids[#ids + 1] = line end
local prefix = os.getenv("BENCH_PREFIX") or ""
local auth = os.getenv("BENCH_AUTH")
local created = 0

setup = function(thread)
  created = created + 1
  thread:set("id", created)
  thread:set("nthreads", tonumber(os.getenv("BENCH_THREADS") or "1"))
end

local n = 0
request = function()
  local i = (n * nthreads + id - 1) % #ids + 1
  n = n + 1
  local headers = { ["Accept"] = "application/json" }
  if auth then headers["Authorization"] = auth end
  return wrk.format("GET", prefix .. "/" .. ids[i], headers)
end

dofile((os.getenv("BENCH_DIR") or "bench") .. "/report.lua")
