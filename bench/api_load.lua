-- wrk script for bench/api_load.sh: the bearer token, random paths and a strict non-2xx count.
--
--   wrk ... -s bench/api_load.lua http://127.0.0.1:PORT -- TOKEN RUNS [EXPERIMENT] [MIX]
--
-- MIX is "mix" (default: each request is, with equal odds, a page of 50 runs at a random
-- offset, one random run, or the experiment with all its runs), or one of "list", "run",
-- "experiment" to send only that request. Run ids are 1..RUNS, the experiment id EXPERIMENT
-- (default 1). done() prints one "RESULT key=value ..." line that the shell script parses.

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
  table.insert(threads, thread)
end

local runs, experiment, mix
local pages

function init(args)
  local token = args[1] or error("api_load.lua: pass the token after --")
  runs = tonumber(args[2] or "") or error("api_load.lua: pass the run count after the token")
  experiment = args[3] or "1"
  mix = args[4] or "mix"
  wrk.headers["Authorization"] = "Bearer " .. token
  pages = math.max(runs - 50, 0)
  -- One sequence per thread: seed with the time and the thread's number.
  math.randomseed(os.time() * 1000 + id)
  non2xx = 0
end

local function list_path()
  return "/api/v1/runs?limit=50&offset=" .. math.random(0, pages)
end

local function run_path()
  return "/api/v1/runs/" .. math.random(1, runs)
end

local function experiment_path()
  return "/api/v1/experiments/" .. experiment
end

local kinds = { list_path, run_path, experiment_path }

function request()
  local path
  if mix == "list" then
    path = list_path()
  elseif mix == "run" then
    path = run_path()
  elseif mix == "experiment" then
    path = experiment_path()
  else
    path = kinds[math.random(1, 3)]()
  end
  return wrk.format("GET", path)
end

-- wrk's own "Non-2xx or 3xx responses" only counts statuses of 400 and up; count every
-- status outside 200..299 here.
function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  for _, thread in ipairs(threads) do
    bad = bad + (thread:get("non2xx") or 0)
  end
  local seconds = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d seconds=%.3f rps=%.1f p50_us=%d p90_us=%d p99_us=%d max_us=%d " ..
    "non2xx=%d connect=%d read=%d write=%d timeout=%d status=%d bytes=%d\n",
    summary.requests, seconds, summary.requests / seconds,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    bad, e.connect, e.read, e.write, e.timeout, e.status, summary.bytes))
end
