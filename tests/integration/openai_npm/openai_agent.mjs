// What an agent loop does with the official openai npm client (v4), through cutline-gateway in
// front of the scripted fake upstream: parallel tool calls non-streaming and streaming (the SDK's
// stream helper assembles the arguments), an upstream that requires its own key, and the
// Responses API (responses.create, responses.stream, and a gateway cut the SDK sees as
// response.incomplete).
//
// Usage: node openai_agent.mjs <baseURL, e.g. http://127.0.0.1:8080/v1> [check ...]
// Checks: tools, tools_stream, keyed, responses, responses_stream, responses_cut (default: all).
// Prints one JSON line per check {check, ok, ...details}; exits 0 when every check passed.
import OpenAI from 'openai';

const [baseURL, ...wanted] = process.argv.slice(2);
if (!baseURL) {
  console.error('usage: node openai_agent.mjs <baseURL> [check ...]');
  process.exit(2);
}
const client = new OpenAI({ apiKey: 'sk-client', baseURL, maxRetries: 0, timeout: 10000 });
const tools = [0, 1].map((i) => ({
  type: 'function',
  function: {
    name: `get_weather_${i}`,
    parameters: { type: 'object', properties: { city: { type: 'string' } } },
  },
}));
const messages = [{ role: 'user', content: 'weather in two cities?' }];
const script = (s) => ({ headers: { 'X-Fake-Script': s } });

// Both calls, whole, with arguments that parse.
function callsOk(calls) {
  if (!Array.isArray(calls) || calls.length !== 2) return false;
  return calls.every(
    (c, i) =>
      c.id === `call_${i}` &&
      c.function.name === `get_weather_${i}` &&
      JSON.parse(c.function.arguments).city === `City ${i}`,
  );
}

const checks = {
  async tools() {
    const r = await client.chat.completions.create({ model: 'fake', messages, tools },
                                                    script('tools=2'));
    const c = r.choices[0];
    return {
      ok: c.finish_reason === 'tool_calls' && callsOk(c.message.tool_calls) &&
          r.cutline?.cause === 'eos',
      finish_reason: c.finish_reason,
      cause: r.cutline?.cause,
    };
  },
  async tools_stream() {
    const stream = client.beta.chat.completions.stream(
      { model: 'fake', messages, tools, stream: true }, script('tools=2'));
    const final = await stream.finalChatCompletion();
    const c = final.choices[0];
    return {
      ok: c.finish_reason === 'tool_calls' && callsOk(c.message.tool_calls),
      finish_reason: c.finish_reason,
      calls: c.message.tool_calls?.length ?? 0,
    };
  },
  async keyed() {
    // The client's key is not the upstream's: the gateway sends the upstream its own.
    const r = await client.chat.completions.create(
      { model: 'keyed', messages }, script('tokens=2,require_key=sk-upstream-secret'));
    return { ok: r.choices[0].message.content === 't0 t1 ', content: r.choices[0].message.content };
  },
  async responses() {
    const r = await client.responses.create({ model: 'fake', input: 'hi' }, script('tokens=3'));
    return {
      ok: r.status === 'completed' && r.output_text === 't0 t1 t2 ' && r.cutline?.cause === 'eos' &&
          r.usage?.output_tokens === 3,
      status: r.status,
      output_text: r.output_text,
      cause: r.cutline?.cause,
    };
  },
  async responses_stream() {
    const stream = client.responses.stream({ model: 'fake', input: 'hi' }, script('tokens=3'));
    let deltas = '';
    let completed = false;
    stream.on('response.output_text.delta', (e) => { deltas += e.delta; });
    stream.on('response.completed', () => { completed = true; });
    const final = await stream.finalResponse();
    return {
      ok: completed && deltas === 't0 t1 t2 ' && final.cutline?.cause === 'eos',
      deltas,
      completed,
      cause: final.cutline?.cause,
    };
  },
  async responses_cut() {
    // The gateway's budget clamps max_output_tokens to 4 (X-Policy: clamp); the upstream would
    // have said 9 tokens. The SDK sees response.incomplete with reason max_output_tokens.
    const events = [];
    let incomplete = null;
    const stream = client.responses.stream(
      { model: 'fake', input: 'hi' },
      { headers: { 'X-Fake-Script': 'tokens=9', 'X-Policy': 'clamp' } });
    stream.on('event', (e) => events.push(e.type));
    stream.on('response.incomplete', (e) => { incomplete = e.response; });
    await stream.done();
    return {
      ok: incomplete?.status === 'incomplete' &&
          incomplete?.incomplete_details?.reason === 'max_output_tokens' &&
          incomplete?.cutline?.cause === 'gateway_budget',
      events: events.filter((t) => !t.endsWith('.delta')),
      reason: incomplete?.incomplete_details?.reason ?? null,
      cause: incomplete?.cutline?.cause ?? null,
    };
  },
};

let failed = 0;
for (const name of wanted.length > 0 ? wanted : Object.keys(checks)) {
  let result;
  try {
    result = await checks[name]();
  } catch (err) {
    result = { ok: false, error: String(err) };
  }
  if (!result.ok) failed += 1;
  console.log(JSON.stringify({ check: name, ...result }));
}
process.exit(failed === 0 ? 0 : 1);
