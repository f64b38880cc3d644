-- wrk script for bench/gateway.sh: cycles through request targets read from a file (one
-- path?query per line, presigned by boto3), with an optional PUT body of N bytes, and that
-- body's Content-MD5 when given (the body is fixed: its MD5 is computed by the caller).
--   wrk ... -s bench/gateway.lua URL -- TARGETS_FILE [PUT BODY_BYTES [CONTENT_MD5]]
local targets = {}
local index = 0
local method = "GET"
local body = nil
local headers = nil
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("thread_number", counter)
end

function init(args)
  for line in io.lines(args[1]) do
    if #line > 0 then targets[#targets + 1] = line end
  end
  if args[2] == "PUT" then
    method = "PUT"
    body = string.rep("0123456789abcdef", math.floor(tonumber(args[3]) / 16))
    if args[4] then headers = { ["Content-MD5"] = args[4] } end
  end
  -- Threads start at different offsets so they do not walk the list in lock step.
  index = ((thread_number or 1) * 7919) % #targets
end

function request()
  index = index % #targets + 1
  return wrk.format(method, targets[index], headers, body)
end
