// Streams one chat completion through cutline-gateway with the official openai npm client (v4),
// the way a Node application would, and checks that the gateway's stop record reached the client
// inside the stream (the last chunk carries a `cutline` object).
//
// Usage: node openai_stream.mjs <baseURL, e.g. http://127.0.0.1:8080/v1> [fake script]
// TLS: run with NODE_EXTRA_CA_CERTS=<the gateway's certificate or its CA>.
// Prints one JSON line {ok, chunks, content, cause, finish_reason}; exits 0 when the stream ended
// with a stop record, 1 otherwise.
import OpenAI from 'openai';

const [baseURL, script = 'tokens=3'] = process.argv.slice(2);
if (!baseURL) {
  console.error('usage: node openai_stream.mjs <baseURL> [fake script]');
  process.exit(2);
}

const client = new OpenAI({ apiKey: 'sk-test', baseURL, maxRetries: 0, timeout: 10000 });
const raw = [];
let content = '';
try {
  const stream = await client.chat.completions.create(
    { model: 'fake', messages: [{ role: 'user', content: 'hi' }], stream: true },
    { headers: { 'X-Fake-Script': script } },
  );
  for await (const chunk of stream) {
    raw.push(JSON.stringify(chunk));
    content += chunk.choices?.[0]?.delta?.content ?? '';
  }
} catch (err) {
  console.log(JSON.stringify({ ok: false, error: String(err) }));
  process.exit(1);
}
const last = raw.length > 0 ? JSON.parse(raw[raw.length - 1]) : {};
const record = raw.find((c) => c.includes('"cutline"'));
const result = {
  ok: record !== undefined,
  chunks: raw.length,
  content,
  cause: record ? JSON.parse(record).cutline?.cause : null,
  finish_reason: last.choices?.[0]?.finish_reason ?? null,
};
console.log(JSON.stringify(result));
process.exit(result.ok ? 0 : 1);
