// Error paths with curl: each bad request gets a 4xx with an OpenAI-style error body and the server stays up;
// then a fuzz run of mutated bodies finds no 5xx and no crash.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { startServer, curl, tempDir, expectOpenAiError, postJson } from './harness.mjs';

let server, dir;
const KEY = { Authorization: 'Bearer sk-right', 'Content-Type': 'application/json' };

before(async () => {
  dir = tempDir();
  server = await startServer(['--api-key', 'sk-right', '--max-body-bytes', '20000']);
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0);
});

function bodyFile(name, content) {
  const f = path.join(dir, name);
  writeFileSync(f, content);
  return f;
}

const CASES = [
  ['malformed JSON', '{"prompt": "x", ', 400, null],
  ['not an object', '[1, 2, 3]', 400, null],
  ['wrong type max_tokens', '{"prompt": "x", "max_tokens": "ten"}', 400, 'max_tokens'],
  ['wrong type prompt', '{"prompt": {"a": 1}}', 400, 'prompt'],
  ['wrong type stream', '{"prompt": "x", "stream": "yes"}', 400, 'stream'],
  ['negative max_tokens', '{"prompt": "x", "max_tokens": -5}', 400, 'max_tokens'],
  ['huge max_tokens', '{"prompt": "x", "max_tokens": 100000000000}', 400, 'max_tokens'],
  ['max_tokens beyond the context', '{"prompt": "x", "max_tokens": 100000}', 400, 'max_tokens'],
  ['temperature < 0', '{"prompt": "x", "temperature": -0.5}', 400, 'temperature'],
  ['top_p > 1', '{"prompt": "x", "top_p": 1.5}', 400, 'top_p'],
  ['n = 0', '{"prompt": "x", "n": 0}', 400, 'n'],
  ['invalid UTF-8', Buffer.concat([Buffer.from('{"prompt": "'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}')]), 400, null],
  ['unknown model', '{"model": "gpt-17", "prompt": "x"}', 404, 'model'],
  ['prompt longer than the context', JSON.stringify({ prompt: 'Once upon a time there was a cat. '.repeat(200) }), 400, null],
  ['stream_options without stream', '{"prompt": "x", "stream_options": {"include_usage": true}}', 400, 'stream_options'],
];

test('bad completion requests get 4xx OpenAI errors', async () => {
  for (const [name, body, status, param] of CASES) {
    const res = await curl(server.url + '/v1/completions', { headers: KEY, bodyFile: bodyFile('b.json', body) });
    expectOpenAiError(assert, res, status);
    if (param) assert.equal(res.json.error.param, param, name);
  }
  const long = await curl(server.url + '/v1/completions',
    { headers: KEY, bodyFile: bodyFile('b.json', JSON.stringify({ prompt: 'Once upon a time there was a cat. '.repeat(60) })) });
  assert.equal(long.json.error.code, 'context_length_exceeded');
});

test('bad chat requests get 4xx OpenAI errors', async () => {
  for (const body of ['{"messages": []}', '{"messages": "hi"}', '{"messages": [{"role": "wizard", "content": "x"}]}',
    '{"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3}']) {
    const res = await curl(server.url + '/v1/chat/completions', { headers: KEY, bodyFile: bodyFile('c.json', body) });
    expectOpenAiError(assert, res, 400);
  }
});

test('missing or wrong key is 401; /health and /ready stay open', async () => {
  const f = bodyFile('ok.json', '{"prompt": "x", "max_tokens": 1}');
  expectOpenAiError(assert, await curl(server.url + '/v1/completions', { bodyFile: f }), 401);
  const wrong = await curl(server.url + '/v1/completions', { bodyFile: f, headers: { Authorization: 'Bearer sk-wrong' } });
  expectOpenAiError(assert, wrong, 401);
  assert.equal(wrong.json.error.type, 'authentication_error');
  expectOpenAiError(assert, await curl(server.url + '/v1/models', { method: 'GET' }), 401);
  assert.equal((await curl(server.url + '/health', { method: 'GET' })).status, 200);
  assert.equal((await curl(server.url + '/ready', { method: 'GET' })).status, 200);
  assert.equal((await curl(server.url + '/v1/completions', { bodyFile: f, headers: KEY })).status, 200);
});

test('body over the limit is 413; unknown route 404; wrong method 405', async () => {
  const big = bodyFile('big.json', JSON.stringify({ prompt: 'x'.repeat(30000) }));
  expectOpenAiError(assert, await curl(server.url + '/v1/completions', { headers: KEY, bodyFile: big }), 413);
  expectOpenAiError(assert, await curl(server.url + '/v1/nothing', { method: 'GET', headers: KEY }), 404);
  expectOpenAiError(assert, await curl(server.url + '/v1/completions', { method: 'GET', headers: KEY }), 405);
  assert.equal((await curl(server.url + '/health', { method: 'GET' })).status, 200);
});

test('fuzzed bodies: never a 5xx, the server stays up', async () => {
  const seeds = [
    { model: 'stories260K', prompt: 'Once', max_tokens: 2, temperature: 0.5, stop: ['x'], logprobs: 1, n: 2, seed: 3 },
    { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, logprobs: true, top_logprobs: 1, stream: true },
  ];
  const tokens = ['null', 'true', '-1', '1e308', '""', '[]', '{}', '0.5', '"\\ud800"', '99999999999999999999', '"\\u0000"'];
  let seed = 42;
  const rnd = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
  for (let i = 0; i < 300; i++) {
    let s = JSON.stringify(seeds[i % 2]);
    for (let m = 0; m < 1 + rnd(3); m++) {
      const pos = rnd(s.length);
      const k = rnd(3);
      if (k === 0) s = s.slice(0, pos) + String.fromCharCode(rnd(128)) + s.slice(pos + 1);
      else if (k === 1) s = s.slice(0, pos) + s.slice(pos + 1 + rnd(6));
      else s = s.slice(0, pos) + tokens[rnd(tokens.length)] + s.slice(pos);
    }
    const endpoint = i % 2 ? '/v1/chat/completions' : '/v1/completions';
    const res = await postJson(server.url + endpoint, s, { Authorization: 'Bearer sk-right' });
    assert.ok(res.status < 500, `5xx for ${s}: ${res.text}`);
    if (res.status >= 400) assert.ok(res.json?.error, `error body for ${s}`);
  }
  assert.equal((await fetch(server.url + '/health')).status, 200);
  assert.equal(server.proc.exitCode, null);
});
