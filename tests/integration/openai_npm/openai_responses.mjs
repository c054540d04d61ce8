// The official openai npm client's Responses API against cutline-backend: client.responses.create
// (non-streaming, with the SDK's output_text helper) and client.responses.stream (the SDK's
// stream helper assembling the text from the events), each with the backend's `cutline` stop
// record in the final response object.
//
// Usage: node openai_responses.mjs <baseURL, e.g. http://127.0.0.1:8000/v1> [model]
// Prints one JSON line {ok, ...}; exits 0 when every check passed, 1 otherwise.
import OpenAI from 'openai';

const [baseURL, model = 'tiny'] = process.argv.slice(2);
if (!baseURL) {
  console.error('usage: node openai_responses.mjs <baseURL> [model]');
  process.exit(2);
}

const client = new OpenAI({ apiKey: 'sk-test', baseURL, maxRetries: 0, timeout: 30000 });
const failures = [];
const check = (cond, what) => {
  if (!cond) failures.push(what);
};
const result = {};
try {
  // Non-streaming, message-list input.
  const created = await client.responses.create({
    model,
    instructions: 'Answer briefly.',
    input: [{ role: 'user', content: [{ type: 'input_text', text: 'Hello there' }] }],
    max_output_tokens: 8,
    seed: 7,
  });
  result.create = { status: created.status, output_text: created.output_text, cause: created.cutline?.cause };
  check(created.object === 'response', 'create: object');
  check(created.status === 'incomplete', 'create: status');
  check(created.incomplete_details?.reason === 'max_output_tokens', 'create: incomplete_details');
  check(typeof created.output_text === 'string', 'create: output_text');
  check(created.output_text === created.output[0].content[0].text, 'create: output_text helper');
  check(created.usage?.output_tokens === 8, 'create: usage.output_tokens');
  check(created.cutline?.cause === 'client_max_tokens', 'create: cutline record');

  // Streaming through the SDK's helper.
  const stream = client.responses.stream({ model, input: 'Hello there', max_output_tokens: 8, seed: 7 });
  const types = [];
  let deltas = '';
  let last = null;
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === 'response.output_text.delta') deltas += event.delta;
    if (event.type === 'response.completed' || event.type === 'response.incomplete') last = event;
  }
  // The helper's final response: the snapshot it assembled from the events (this SDK version
  // sets output_text only on responses.create's result).
  const final = await stream.finalResponse();
  const finalText = final.output?.[0]?.content?.[0]?.text;
  result.stream = { events: types.length, deltas, final_text: finalText, last: last?.type };
  check(types[0] === 'response.created', 'stream: first event');
  check(types.includes('response.output_text.delta'), 'stream: deltas');
  check(types.includes('response.output_text.done'), 'stream: text done');
  check(last?.type === 'response.incomplete', 'stream: response.incomplete');
  check(last?.response?.cutline?.cause === 'client_max_tokens', 'stream: cutline record');
  check(last?.response?.output?.[0]?.content?.[0]?.text === deltas, 'stream: final text');
  check(finalText === deltas, 'stream: SDK assembled text');
  // The same seed and conversation as the non-streaming call (no instructions there) is not
  // required to match; the same request streamed and not must.
  const again = await client.responses.create({ model, input: 'Hello there', max_output_tokens: 8, seed: 7 });
  check(again.output_text === deltas, 'stream vs create: same text');

  // A model stop: the stream ends with response.completed (the first seed whose answer ends with
  // EOS in the tiny model).
  let completed = null;
  for (let seed = 1; seed <= 60 && !completed; ++seed) {
    const s = client.responses.stream({ model, input: 'Hi', max_output_tokens: 300, seed });
    let lastEvent = null;
    for await (const event of s) lastEvent = event;
    if (lastEvent?.type === 'response.completed') completed = { seed, final: await s.finalResponse() };
  }
  result.completed = completed ? { seed: completed.seed, status: completed.final.status } : null;
  check(completed !== null, 'completed: some seed ends with response.completed');
  check(completed?.final?.status === 'completed', 'completed: final status');
  check(completed?.final?.cutline?.cause === 'eos', 'completed: cutline record');
} catch (err) {
  failures.push(String(err));
}
result.ok = failures.length === 0;
result.failures = failures;
console.log(JSON.stringify(result));
process.exit(result.ok ? 0 : 1);
