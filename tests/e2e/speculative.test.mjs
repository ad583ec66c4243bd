// Speculative decoding through the real `tessera serve` binary and the official `openai` client: greedy text is
// the same with speculation on, off per request and on a server started without it; streaming gives the
// non-streaming text; the spec_decode counters move for speculating requests only; stop strings and max_tokens
// land on the same token; structured output speculates against its schema and gives the same document; a
// `speculative` value that is not a boolean is a 400; the embedded model's INT4 copy (made by `tessera quantize`)
// as draft model gives the same text too.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  BINARY, startServer, openaiPackage, metrics, tesseraMetric, postJson, expectOpenAiError, tempDir, sleep,
} from './harness.mjs';

const execFileP = promisify(execFile);
const OpenAI = openaiPackage().default ?? openaiPackage();
const MODEL = 'stories260K';
// Extractive: the passage repeats, so prompt lookup finds the continuation in the prompt from the first step.
const PASSAGE = 'Lily and Ben went to the park. They saw a big dog and a little cat. The dog ran after the cat.';
const PROMPT = `${PASSAGE} ${PASSAGE} ${PASSAGE.slice(0, 40)}`;
const MESSAGES = [{ role: 'user', content: PROMPT }];
// Servers without the result cache: a greedy request answered from it would never reach the engine (its key
// does not hold `speculative`: greedy output does not depend on it), and the counters would not move.
const COMMON = ['--no-result-cache'];
const NGRAM = ['--spec', 'ngram', '--spec-switch', 'always', ...COMMON];

let plain, ngram;
const clients = new Map();
const client = (server) => {
  if (!clients.has(server)) clients.set(server, new OpenAI({ baseURL: server.url + '/v1', apiKey: 'none', maxRetries: 0 }));
  return clients.get(server);
};

before(async () => {
  plain = await startServer(COMMON);
  ngram = await startServer(NGRAM);
});
after(async () => {
  for (const s of [plain, ngram]) if (s) assert.equal((await s.stop()).code, 0, s.stderr);
});

// The spec_decode counters once the engine has published the step that finished the last request: its stats
// come after the step that delivered the final token, so poll (bounded) until nothing runs or waits.
async function specCounters(server) {
  for (let i = 0; ; ++i) {
    const text = await metrics(server.url);
    const idle = tesseraMetric(text, 'num_requests_running') === 0 && tesseraMetric(text, 'num_requests_waiting') === 0;
    if (idle || i === 100) {
      return {
        drafts: tesseraMetric(text, 'spec_decode_num_drafts_total'),
        draftTokens: tesseraMetric(text, 'spec_decode_num_draft_tokens_total'),
        accepted: tesseraMetric(text, 'spec_decode_num_accepted_tokens_total'),
      };
    }
    await sleep(20);
  }
}

async function completion(server, extra = {}) {
  const r = await client(server).completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 48, temperature: 0, ...extra });
  return { text: r.choices[0].text, finish: r.choices[0].finish_reason, tokens: r.usage.completion_tokens };
}

async function chat(server, extra = {}) {
  const r = await client(server).chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: 48, temperature: 0, ...extra });
  return { text: r.choices[0].message.content, finish: r.choices[0].finish_reason, tokens: r.usage.completion_tokens };
}

test('greedy text is the same speculating, opted out, and on a server without speculation', async () => {
  const want = await completion(plain);
  const wantChat = await chat(plain);
  assert.ok(want.tokens > 8 && wantChat.tokens > 8, 'long enough outputs to verify several drafts');

  // Relative to what is counted now (the start-up probe may have speculated).
  const start = await specCounters(ngram);
  assert.deepEqual(await completion(ngram), want, 'the server default (speculating)');
  assert.deepEqual(await completion(ngram, { speculative: true }), want);
  assert.deepEqual(await chat(ngram, { speculative: true }), wantChat);
  const afterOn = await specCounters(ngram);
  assert.ok(afterOn.drafts > start.drafts, 'verifications counted');
  assert.ok(afterOn.draftTokens - start.draftTokens > afterOn.drafts - start.drafts,
    'several draft tokens per verification');
  assert.ok(afterOn.accepted > start.accepted, 'the extractive prompt gets guesses accepted');

  assert.deepEqual(await completion(ngram, { speculative: false }), want);
  assert.deepEqual(await chat(ngram, { speculative: false }), wantChat);
  assert.deepEqual(await specCounters(ngram), afterOn, 'opted-out requests never speculate');
  // The plain server has no proposer: its counters stay at 0.
  assert.ok(!(await specCounters(plain)).draftTokens);
});

test('streaming gives the non-streaming text, speculating', async () => {
  const want = await completion(ngram, { max_tokens: 40 });
  const wantChat = await chat(ngram, { max_tokens: 40 });
  const before = await specCounters(ngram);

  let text = '', finish = null, chunks = 0;
  const stream = await client(ngram).completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 40, temperature: 0, stream: true });
  for await (const chunk of stream) {
    for (const c of chunk.choices) { chunks++; text += c.text; if (c.finish_reason) finish = c.finish_reason; }
  }
  assert.equal(text, want.text);
  assert.equal(finish, want.finish);
  assert.ok(chunks > 1);

  let chatText = '', chatFinish = null;
  const chatStream = await client(ngram).chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: 40, temperature: 0, stream: true });
  for await (const chunk of chatStream) {
    for (const c of chunk.choices) { chatText += c.delta?.content ?? ''; if (c.finish_reason) chatFinish = c.finish_reason; }
  }
  assert.equal(chatText, wantChat.text);
  assert.equal(chatFinish, wantChat.finish);
  assert.ok((await specCounters(ngram)).drafts > before.drafts, 'the streams speculated');
});

test('max_tokens and stop strings land on the same token as without speculation', async () => {
  for (const maxTokens of [1, 3, 7]) {
    const want = await completion(plain, { max_tokens: maxTokens });
    assert.equal(want.finish, 'length');
    assert.deepEqual(await completion(ngram, { max_tokens: maxTokens }), want, `max_tokens ${maxTokens}`);
  }
  const full = await completion(plain);
  // Stops that end the text at several points of a verification step's accepted run.
  for (const at of [6, 23]) {
    const stop = full.text.slice(at, at + 3);
    const want = await completion(plain, { stop: [stop] });
    assert.equal(want.finish, 'stop', `stop ${JSON.stringify(stop)}`);
    assert.deepEqual(await completion(ngram, { stop: [stop] }), want, `stop ${JSON.stringify(stop)}`);
    assert.deepEqual(await chat(ngram, { stop: [stop] }), await chat(plain, { stop: [stop] }), `chat stop ${JSON.stringify(stop)}`);
  }
});

test('structured output speculates against its schema and gives the same document', async () => {
  const schema = {
    type: 'object',
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 12 },
      mood: { enum: ['happy', 'sad', 'sleepy'] },
      friends: { type: 'array', maxItems: 3, items: { type: 'string', maxLength: 8 } },
    },
    required: ['name', 'mood', 'friends'],
    additionalProperties: false,
  };
  // The example in the prompt gives prompt lookup spans of the document to guess from.
  const prompt = 'Lily wrote {"name": "Lily", "mood": "happy", "friends": ["Ben", "Tom"]} and Ben wrote ';
  const responseFormat = { type: 'json_schema', json_schema: { name: 'person', strict: true, schema } };
  const ask = (server, extra = {}) => client(server).chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: prompt }], max_tokens: 120, temperature: 0,
    response_format: responseFormat, ...extra,
  });
  const want = await ask(plain);
  assert.equal(want.choices[0].finish_reason, 'stop');
  const doc = JSON.parse(want.choices[0].message.content);
  assert.deepEqual(Object.keys(doc), ['name', 'mood', 'friends']);

  const before = await specCounters(ngram);
  const got = await ask(ngram);
  assert.equal(got.choices[0].message.content, want.choices[0].message.content);
  assert.equal(got.choices[0].finish_reason, 'stop');
  const after = await specCounters(ngram);
  assert.ok(after.drafts > before.drafts, `the constrained request speculated: ${JSON.stringify({ before, after })}`);
  assert.ok(after.accepted > before.accepted, 'guesses checked against the schema were accepted');
});

test('a speculative value that is not a boolean is a 400 naming the field', async () => {
  for (const value of ['yes', 'false', 1, 0, {}, [true]]) {  // null is the default, as OpenAI's fields
    for (const [route, body] of [['/v1/completions', { prompt: PROMPT }], ['/v1/chat/completions', { messages: MESSAGES }]]) {
      const res = await postJson(ngram.url + route, { model: MODEL, max_tokens: 4, ...body, speculative: value });
      expectOpenAiError(assert, res, 400);
      assert.equal(res.json.error.param, 'speculative', res.text);
      assert.equal(res.json.error.type, 'invalid_request_error');
    }
  }
  // The server is still serving.
  assert.equal((await completion(ngram, { max_tokens: 2 })).tokens, 2);
});

test('the INT4 copy as draft model gives the same text', async () => {
  const draft = path.join(tempDir(), 'stories260K-int4.gguf');
  await execFileP(BINARY, ['quantize', '--type', 'int4', '-o', draft]);
  const server = await startServer(['--draft-model', draft, '--spec-switch', 'always', ...COMMON]);
  try {
    assert.deepEqual(await completion(server), await completion(plain));
    assert.deepEqual(await chat(server), await chat(plain));
    for (const maxTokens of [1, 5]) {
      assert.deepEqual(await completion(server, { max_tokens: maxTokens }), await completion(plain, { max_tokens: maxTokens }));
    }
    const c = await specCounters(server);
    assert.ok(c.drafts > 0 && c.accepted > 0, `the draft proposed and was accepted: ${JSON.stringify(c)}`);
    // Opted out: the counters stay.
    await completion(server, { speculative: false, max_tokens: 20 });
    assert.deepEqual(await specCounters(server), c);
  } finally {
    assert.equal((await server.stop()).code, 0, server.stderr);
  }
});
