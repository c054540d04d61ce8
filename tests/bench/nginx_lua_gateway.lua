-- The chat-route work of cutline-gateway, written for nginx with the Lua module (the OpenResty
-- stack API gateways such as Kong and Apache APISIX build on), so that run_gateway_request_cost.sh
-- can compare the gateway with another implementation of the same work, not only with nginx
-- relaying bytes. Per request it:
--   parses the request's JSON, refuses a malformed one with a 400, clamps the output-token limit
--   to the policy's (max_completion_tokens where the client used it, max_tokens otherwise), asks
--   the upstream for a stream with usage, forwards a request id;
--   parses every SSE event of the answer, counts tokens, keeps the finish reason and the usage;
--   for a non-streamed request, assembles the chat.completion object with a stop record beside it;
--   counts the outcome in shared-memory metrics.
-- Loaded with lua_package_path; each phase calls one function below.
local cjson = require "cjson.safe"

local M = {}
local LIMIT = 64
local null = cjson.null

local function refuse(message)
  ngx.status = 400
  ngx.header.content_type = "application/json"
  ngx.print(cjson.encode({error = {message = message, type = "invalid_request_error",
                                   code = "invalid_request"}}))
  return ngx.exit(400)
end

function M.access()
  ngx.req.read_body()
  local body = ngx.req.get_body_data()
  if not body then return refuse("request body missing or too large") end
  local req = cjson.decode(body)
  if type(req) ~= "table" then return refuse("request body is not a JSON object") end
  if type(req.model) ~= "string" then return refuse("model must be a string") end
  if type(req.messages) ~= "table" then return refuse("messages must be an array") end
  local ctx = ngx.ctx
  local requested = req.max_completion_tokens
  local field = "max_completion_tokens"
  if requested == nil then
    requested, field = req.max_tokens, "max_tokens"
  end
  if requested ~= nil and (type(requested) ~= "number" or requested < 1) then
    return refuse(field .. " must be a positive integer")
  end
  local effective = (requested and requested < LIMIT) and requested or LIMIT
  req[field] = effective
  ctx.requested, ctx.effective, ctx.model = requested, effective, req.model
  ctx.stream = req.stream == true
  req.stream = true
  req.stream_options = {include_usage = true}
  ngx.req.set_body_data(cjson.encode(req))
  ctx.start = ngx.now()
  ctx.tokens = 0
  ctx.parts = {}
  ctx.pending = ""
end

function M.header()
  ngx.header["X-Request-Id"] = ngx.var.request_id
  if ngx.ctx.start and not ngx.ctx.stream then
    ngx.header.content_length = nil
    ngx.header.content_type = "application/json"
  end
end

local function on_event(ctx, data)
  if data == "[DONE]" then return end
  local chunk = cjson.decode(data)
  if type(chunk) ~= "table" then return end
  ctx.id = chunk.id or ctx.id
  ctx.created = chunk.created or ctx.created
  local choice = type(chunk.choices) == "table" and chunk.choices[1]
  if type(choice) == "table" then
    local delta = choice.delta
    if type(delta) == "table" and type(delta.content) == "string" then
      ctx.parts[#ctx.parts + 1] = delta.content
      ctx.tokens = ctx.tokens + 1
      ctx.first = ctx.first or ngx.now()
    end
    if choice.finish_reason and choice.finish_reason ~= null then
      ctx.finish = choice.finish_reason
    end
  end
  if type(chunk.usage) == "table" then ctx.usage = chunk.usage end
end

local function stop_record(ctx)
  local now = ngx.now()
  local cause = ctx.finish == "length" and "max_tokens" or "eos"
  return {
    v = 1, cause = cause, origin = "model", truncated = cause ~= "eos", serving_cut = false,
    reporter = "gateway", request_id = ngx.var.request_id, policy = "bench",
    requested_max_tokens = ctx.requested, effective_max_tokens = ctx.effective,
    input_tokens = ctx.usage and ctx.usage.prompt_tokens,
    output_tokens = ctx.usage and ctx.usage.completion_tokens or ctx.tokens,
    count_method = ctx.usage and "usage" or "chunks",
    ttft_ms = ctx.first and (ctx.first - ctx.start) * 1000 or null,
    duration_ms = (now - ctx.start) * 1000, attempts = 1,
  }
end

function M.body()
  local ctx = ngx.ctx
  if not ctx.start then return end  -- a refusal written by access()
  local pending = ctx.pending .. (ngx.arg[1] or "")
  local at = 1
  while true do
    local s, e = pending:find("\n\n", at, true)
    if not s then break end
    if pending:sub(at, at + 5) == "data: " then on_event(ctx, pending:sub(at + 6, s - 1)) end
    at = e + 1
  end
  ctx.pending = pending:sub(at)
  if ctx.stream then return end  -- the events pass through as they came
  if not ngx.arg[2] then
    ngx.arg[1] = nil
    return
  end
  ctx.record = stop_record(ctx)
  ngx.arg[1] = cjson.encode({
    id = ctx.id, object = "chat.completion", created = ctx.created, model = ctx.model,
    choices = {{index = 0, message = {role = "assistant", content = table.concat(ctx.parts)},
                finish_reason = ctx.finish or null}},
    usage = ctx.usage, cutline = ctx.record,
  })
end

function M.log()
  local ctx = ngx.ctx
  local metrics = ngx.shared.metrics
  local cause = ctx.record and ctx.record.cause or "none"
  metrics:incr("requests_total{route=\"chat\",cause=\"" .. cause .. "\"}", 1, 0)
  metrics:incr("output_tokens_total", ctx.tokens or 0, 0)
  local ms = ctx.start and (ngx.now() - ctx.start) * 1000 or 0
  local bucket = ms < 5 and "5" or ms < 50 and "50" or ms < 500 and "500" or "+Inf"
  metrics:incr("duration_ms_bucket{le=\"" .. bucket .. "\"}", 1, 0)
end

return M
