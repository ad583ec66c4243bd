// The official `openai` npm package against `tessera serve`: chat and completions, streaming and not; greedy
// text equals a direct engine run; usage chunks only when asked.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, openaiPackage, directRun } from './harness.mjs';

const OpenAI = openaiPackage().default ?? openaiPackage();
let server, client;
const PROMPT = 'Once upon a time';

before(async () => {
  server = await startServer(['--api-key', 'sk-test']);
  client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'sk-test', maxRetries: 0 });
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0);
});

test('models list names the served model', async () => {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, 'stories260K');
  const one = await client.models.retrieve('stories260K');
  assert.equal(one.id, 'stories260K');
  await assert.rejects(client.models.retrieve('gpt-4'), (e) => e.status === 404);
});

test('greedy completion equals a direct engine run', async () => {
  const expected = await directRun(PROMPT, 40);
  const r = await client.completions.create({ model: 'stories260K', prompt: PROMPT, max_tokens: 40, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].text, expected);
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('streaming completion concatenates to the same text, usage only when asked', async () => {
  // Lengths other than the test above: a result-cache hit would replay the whole text as one chunk.
  for (const [includeUsage, n] of [[false, 36], [true, 37]]) {
    const expected = await directRun(PROMPT, n);
    const stream = await client.completions.create({
      model: 'stories260K', prompt: PROMPT, max_tokens: n, temperature: 0, stream: true,
      ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
    });
    let text = '', finish = null, usage = null, chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) { text += c.text; if (c.finish_reason) finish = c.finish_reason; }
      if (!includeUsage) assert.ok(!('usage' in chunk) || chunk.usage === undefined, 'no usage field unless asked');
    }
    assert.ok(chunks > 1);
    assert.equal(text, expected);
    assert.ok(['stop', 'length'].includes(finish));
    if (includeUsage) {
      assert.ok(usage, 'usage chunk expected');
      assert.ok(usage.completion_tokens > 0);
    } else {
      assert.equal(usage, null);
    }
  }
});

test('chat, streaming and not, with logprobs and n', async () => {
  const messages = [{ role: 'user', content: 'Once upon a time' }];
  const r = await client.chat.completions.create({
    model: 'stories260K', messages, max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 2, n: 2,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 2);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(r.choices[0].message.content.length > 0);
  assert.equal(r.choices[0].message.content, r.choices[1].message.content, 'greedy choices agree');
  const lp = r.choices[0].logprobs.content;
  assert.ok(lp.length > 0);
  assert.ok(lp[0].logprob <= 0);
  assert.equal(lp[0].top_logprobs.length, 2);

  const stream = await client.chat.completions.create({
    model: 'stories260K', messages, max_tokens: 12, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '', role = null, finish = null, usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(text, r.choices[0].message.content);
  assert.ok(['stop', 'length'].includes(finish));
  assert.equal(usage.completion_tokens, r.usage.completion_tokens / 2);
});

test('seeded sampling is reproducible; stop strings end the text', async () => {
  const a = await client.completions.create({ model: 'stories260K', prompt: PROMPT, max_tokens: 24, temperature: 1, seed: 7 });
  const b = await client.completions.create({ model: 'stories260K', prompt: PROMPT, max_tokens: 24, temperature: 1, seed: 7 });
  assert.equal(a.choices[0].text, b.choices[0].text);
  const full = await directRun(PROMPT, 40);
  const word = full.trim().split(/\s+/)[2];
  const s = await client.completions.create({ model: 'stories260K', prompt: PROMPT, max_tokens: 40, temperature: 0, stop: [word] });
  assert.equal(s.choices[0].finish_reason, 'stop');
  assert.ok(!s.choices[0].text.includes(word));
  assert.ok(full.startsWith(s.choices[0].text));
});

test('logit_bias and min_tokens pass through the client; /tokenize counts what usage reports', async () => {
  const post = async (path, body) => {
    const r = await fetch(server.url + path, {
      method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: 'Bearer sk-test' },
      body: JSON.stringify(body),
    });
    assert.equal(r.status, 200, path);
    return r.json();
  };
  const full = await directRun(PROMPT, 30);
  const counted = await post('/tokenize', { model: 'stories260K', prompt: PROMPT });
  const plain = await client.completions.create({ model: 'stories260K', prompt: PROMPT, max_tokens: 30, temperature: 0 });
  assert.equal(plain.usage.prompt_tokens, counted.count);
  assert.equal((await post('/detokenize', { tokens: counted.tokens })).prompt, PROMPT);

  // +100 outweighs every logit of this model: each generated token is the favoured one.
  const [dragon] = (await post('/tokenize', { prompt: ' dragon', add_special_tokens: false })).tokens;
  const forced = await client.completions.create({
    model: 'stories260K', prompt: PROMPT, max_tokens: 4, temperature: 0, logit_bias: { [dragon]: 100 },
  });
  assert.equal(forced.choices[0].text.trim(), (await post('/detokenize', { tokens: [dragon, dragon, dragon, dragon] })).prompt.trim());

  // A stop string met before min_tokens is text: with min_tokens = max_tokens the output is the free run's.
  const word = full.trim().split(/\s+/)[2];
  const held = await client.completions.create({
    model: 'stories260K', prompt: PROMPT, max_tokens: 30, temperature: 0, stop: [word], min_tokens: 30,
  });
  assert.equal(held.choices[0].text, full);
  assert.equal(held.choices[0].finish_reason, 'length');
  await assert.rejects(
    client.completions.create({ model: 'stories260K', prompt: PROMPT, max_tokens: 4, logit_bias: { 'x': 1 } }),
    (e) => e.status === 400 && e.error?.param === 'logit_bias');
});

test('echo with logprobs and max_tokens 0 scores the prompt, as evaluation harnesses ask', async () => {
  const r = await client.completions.create({
    model: 'stories260K', prompt: PROMPT, max_tokens: 0, echo: true, logprobs: 1, temperature: 0,
  });
  const c = r.choices[0];
  assert.equal(c.text, PROMPT);
  assert.equal(r.usage.completion_tokens, 0);
  assert.equal(c.logprobs.tokens.length, r.usage.prompt_tokens);
  assert.equal(c.logprobs.token_logprobs[0], null);
  assert.equal(c.logprobs.top_logprobs[0], null);
  for (const lp of c.logprobs.token_logprobs.slice(1)) assert.ok(lp <= 0 && lp > -100, String(lp));
});
