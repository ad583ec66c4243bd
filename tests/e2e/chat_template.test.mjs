// Chat templates end to end: `tessera serve --chat-template` with real templates from shared/chat-templates on
// the embedded model. A conversation the template rejects is a 400 carrying the template's raise_exception
// message; chat_template_kwargs reach the template (Qwen3's enable_thinking lengthens the prompt); a template
// that does not parse stops the server at start with the template's line and column.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { BINARY, SOURCE_DIR, startServer, postJson, tempDir, expectOpenAiError } from './harness.mjs';

const SHARED_DIR = process.env.TESSERA_SHARED_DIR ?? path.resolve(SOURCE_DIR, '../shared');
const TEMPLATES = path.join(SHARED_DIR, 'chat-templates');

function chat(server, body) {
  return postJson(server.url + '/v1/chat/completions', { max_tokens: 4, temperature: 0, ...body });
}

test('Gemma: the template renders turns and rejects a system message with its own words', async () => {
  const server = await startServer(['--chat-template', path.join(TEMPLATES, 'google-gemma-2-2b-it.jinja')]);
  try {
    assert.match(server.stderr, /chat prompts use the chat template in .*gemma/);
    const ok = await chat(server, { messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello' },
      { role: 'user', content: 'Tell me a story' }] });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.choices[0].message.role, 'assistant');

    const sys = await chat(server, { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }] });
    expectOpenAiError(assert, sys, 400);
    assert.equal(sys.json.error.message, 'System role not supported');
    assert.equal(sys.json.error.code, 'invalid_chat_template');
    assert.equal(sys.json.error.param, 'messages');

    const twice = await chat(server, { messages: [{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }] });
    expectOpenAiError(assert, twice, 400);
    assert.equal(twice.json.error.message, 'Conversation roles must alternate user/assistant/user/assistant/...');
  } finally {
    assert.equal((await server.stop()).code, 0);
  }
});

test('Qwen3: chat_template_kwargs switch thinking off', async () => {
  const dir = tempDir();
  const file = path.join(dir, 'qwen3.jinja');
  writeFileSync(file, JSON.parse(readFileSync(path.join(TEMPLATES, 'qwen3-tokenizer_config.json'), 'utf8')).chat_template);
  const server = await startServer(['--chat-template', file]);
  try {
    const messages = [{ role: 'user', content: 'Once upon a time' }];
    const plain = await chat(server, { messages });
    const off = await chat(server, { messages, chat_template_kwargs: { enable_thinking: false } });
    const on = await chat(server, { messages, chat_template_kwargs: { enable_thinking: true } });
    for (const r of [plain, off, on]) assert.equal(r.status, 200, r.text);
    // enable_thinking=false appends an empty <think></think> block to the prompt.
    assert.ok(off.json.usage.prompt_tokens > plain.json.usage.prompt_tokens);
    assert.equal(on.json.usage.prompt_tokens, plain.json.usage.prompt_tokens);

    const reserved = await chat(server, { messages, chat_template_kwargs: { add_generation_prompt: false } });
    expectOpenAiError(assert, reserved, 400);
    assert.equal(reserved.json.error.param, 'chat_template_kwargs');
    const notObject = await chat(server, { messages, chat_template_kwargs: [1] });
    expectOpenAiError(assert, notObject, 400);
  } finally {
    assert.equal((await server.stop()).code, 0);
  }
});

test('a template that does not parse stops the server at start', async () => {
  const file = path.join(tempDir(), 'bad.jinja');
  writeFileSync(file, '{% for m in messages %}\n{% macro f() %}{% endmacro %}{% endfor %}');
  const proc = spawn(BINARY, ['serve', '--port', '0', '--threads', '1', '--chat-template', file],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d.toString(); });
  const code = await new Promise((resolve) => proc.on('exit', (c) => resolve(c)));
  assert.notEqual(code, 0);
  assert.match(stderr, /error: chat template line 2, column 4: the 'macro' tag is not supported .*\(in .*bad\.jinja; --chat-template FILE replaces it\)/);
});
