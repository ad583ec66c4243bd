// Tenants on one server (issue 17), against the real binary: API keys from a file and the environment with
// per-key attributes; the result cache and the prefix cache kept apart per tenant (cache_salt separating
// further, --shared-prefix-cache sharing prefixes); priority beyond a key's allowance is a 403; per-key rate
// limits; /metrics behind a key unless --metrics-public; Host and Origin checks against DNS rebinding and CSRF.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { BINARY, withServer, postJson, curl, tempDir, expectOpenAiError } from './harness.mjs';

const KEYS = `# tenants: alice has two keys, bob is rate limited, ops may jump the queue
sk-alice-1 name=alice
sk-alice-2 name=alice
sk-bob     name=bob rps=1 burst=1
sk-ops     name=ops priority_min=-100
`;

function keysFile() {
  const file = path.join(tempDir(), 'keys.txt');
  writeFileSync(file, KEYS);
  return file;
}

const as = (key) => ({ Authorization: `Bearer ${key}` });
const GREEDY = { prompt: 'Once upon a time', max_tokens: 12, temperature: 0 };
const PREFIX = 'Lily and Ben went to the park to play with a big red ball. '.repeat(5);
const cached = (res) => res.json.usage.prompt_tokens_details?.cached_tokens ?? 0;

test('keys file and TESSERA_API_KEYS: caches apart per tenant, priority allowance, per-key limits, /metrics', async () => {
  await withServer(['--api-keys-file', keysFile()], async (s) => {
    const complete = (body, key, headers = {}) => postJson(s.url + '/v1/completions', body, { ...as(key), ...headers });
    // Result cache: a hit for the same tenant (either of alice's keys), never for another.
    assert.equal((await complete(GREEDY, 'sk-alice-1')).headers.get('x-tessera-cache'), null);
    assert.equal((await complete(GREEDY, 'sk-alice-1')).headers.get('x-tessera-cache'), 'hit');
    assert.equal((await complete(GREEDY, 'sk-alice-2')).headers.get('x-tessera-cache'), 'hit');
    const bob = await complete(GREEDY, 'sk-bob');
    assert.equal(bob.status, 200);
    assert.equal(bob.headers.get('x-tessera-cache'), null, 'bob learnt what alice asked');
    assert.equal((await complete({ ...GREEDY, cache_salt: 'mine' }, 'sk-alice-1')).headers.get('x-tessera-cache'), null);
    // Prefix cache: cached_tokens must not reveal to bob how much of his prompt alice sent.
    const sampled = (tail) => ({ prompt: PREFIX + tail, max_tokens: 2, temperature: 1 });
    assert.equal((await complete(sampled('Then'), 'sk-alice-1')).status, 200);
    await new Promise((r) => setTimeout(r, 1100));  // bob's request bucket refills
    const probe = await complete(sampled('Then the dog'), 'sk-bob');
    assert.equal(probe.status, 200, probe.text);
    assert.equal(cached(probe), 0, JSON.stringify(probe.json.usage));
    assert.ok(cached(await complete(sampled('Then a cat'), 'sk-alice-2')) > 0, 'alice reuses her own prefix');
    // Priority: more urgent than the key allows is a 403 (body or header); ops may.
    const urgent = await complete({ ...GREEDY, priority: -1 }, 'sk-alice-1');
    expectOpenAiError(assert, urgent, 403);
    assert.equal(urgent.json.error.code, 'permission_denied');
    assert.equal(urgent.json.error.param, 'priority');
    expectOpenAiError(assert, await complete(GREEDY, 'sk-alice-1', { 'X-Priority': '-5' }), 403);
    assert.equal((await complete({ ...GREEDY, priority: -50 }, 'sk-ops')).status, 200);
    expectOpenAiError(assert, await complete({ ...GREEDY, priority: -500 }, 'sk-ops'), 403);
    // bob's own limit (rps=1, burst=1), alice unaffected.
    await new Promise((r) => setTimeout(r, 1100));
    assert.equal((await complete(GREEDY, 'sk-bob')).status, 200);
    const limited = await complete(GREEDY, 'sk-bob');
    expectOpenAiError(assert, limited, 429);
    assert.equal((await complete(GREEDY, 'sk-alice-1')).status, 200);
    // /metrics needs a key when keys are configured.
    assert.equal((await fetch(s.url + '/metrics')).status, 401);
    assert.equal((await fetch(s.url + '/metrics', { headers: as('sk-ops') })).status, 200);
    assert.equal((await fetch(s.url + '/health')).status, 200);
    expectOpenAiError(assert, await complete(GREEDY, 'sk-nobody'), 401);
  });
  // Keys from the environment (out of `ps`), the keys file's format with commas; sharing and public metrics.
  await withServer(['--shared-prefix-cache', '--metrics-public'], async (s) => {
    const complete = (body, key) => postJson(s.url + '/v1/completions', body, as(key));
    const sampled = (tail) => ({ prompt: PREFIX + tail, max_tokens: 2, temperature: 1 });
    assert.equal((await complete(sampled('Then'), 'sk-env-a')).status, 200);
    assert.ok(cached(await complete(sampled('Then the dog'), 'sk-env-b')) > 0, '--shared-prefix-cache shares');
    assert.equal((await complete(GREEDY, 'sk-env-a')).status, 200);
    assert.equal((await complete(GREEDY, 'sk-env-b')).headers.get('x-tessera-cache'), null, 'results stay per tenant');
    assert.equal((await fetch(s.url + '/metrics')).status, 200);
    expectOpenAiError(assert, await complete(GREEDY, 'sk-alice-1'), 401);
  }, { env: { TESSERA_API_KEYS: 'sk-env-a name=a,sk-env-b name=b' } });
});

test('a bad keys file stops the server with a message that names the entry, never the key', () => {
  const file = path.join(tempDir(), 'bad.txt');
  writeFileSync(file, 'sk-fine\nsk-very-secret colour=blue\n');
  let stderr = '';
  try {
    execFileSync(BINARY, ['serve', '--port', '0', '--api-keys-file', file], { stdio: 'pipe' });
    assert.fail('the server started');
  } catch (e) {
    stderr = e.stderr.toString();
  }
  assert.ok(stderr.includes('entry 2: unknown attribute \'colour\''), stderr);
  assert.ok(!stderr.includes('sk-very-secret'), stderr);
  const help = execFileSync(BINARY, ['serve', '--help']).toString();
  assert.ok(help.includes('visible to every user in `ps`'), help);
});

test('keys asked for and none given (an empty variable, a file of comments, an empty --api-key) stop the server', () => {
  const comments = path.join(tempDir(), 'comments.txt');
  writeFileSync(comments, '# the keys go here\n\n');
  const refusal = (args, env = {}) => {
    try {
      execFileSync(BINARY, ['serve', '--port', '0', ...args], { stdio: 'pipe', env: { ...process.env, ...env } });
    } catch (e) {
      return e.stderr.toString();
    }
    assert.fail(`the server started with ${JSON.stringify(args)} ${JSON.stringify(env)}`);
  };
  assert.match(refusal([], { TESSERA_API_KEYS: '' }), /TESSERA_API_KEYS holds no API key/);
  assert.match(refusal(['--api-keys-file', comments]), /holds no API key/);
  assert.match(refusal(['--api-key', '']), /API key number 1 is empty/);
});

test('Host and Origin: DNS rebinding and cross-site POSTs are refused, listed origins get CORS', async () => {
  const body = path.join(tempDir(), 'body.json');
  writeFileSync(body, JSON.stringify(GREEDY));
  const json = { 'Content-Type': 'application/json' };
  await withServer([], async (s) => {
    expectOpenAiError(assert, await curl(s.url + '/v1/models', { method: 'GET', headers: { Host: 'evil.example' } }), 403);
    const rebound = await curl(s.url + '/v1/completions', { bodyFile: body, headers: { ...json, Host: 'evil.example:80' } });
    expectOpenAiError(assert, rebound, 403);
    assert.equal((await curl(s.url + '/health', { method: 'GET', headers: { Host: `localhost:${s.port}` } })).status, 200);
    const csrf = await curl(s.url + '/v1/completions', { bodyFile: body, headers: { ...json, Origin: 'https://evil.example' } });
    expectOpenAiError(assert, csrf, 403);
    assert.equal((await curl(s.url + '/v1/completions', { bodyFile: body, headers: json })).status, 200);
  });
  await withServer(['--cors-origins', 'https://app.example', '--allowed-hosts', 'api.example,127.0.0.1'], async (s) => {
    const ok = await curl(s.url + '/v1/completions', { bodyFile: body, headers: { ...json, Origin: 'https://app.example' } });
    assert.equal(ok.status, 200, ok.body);
    assert.match(ok.head, /access-control-allow-origin: https:\/\/app\.example/i);
    const pre = await curl(s.url + '/v1/completions', { method: 'OPTIONS', headers: { Origin: 'https://app.example' } });
    assert.equal(pre.status, 204);
    assert.match(pre.head, /access-control-allow-headers: .*Authorization/i);
    assert.equal((await curl(s.url + '/health', { method: 'GET', headers: { Host: 'api.example' } })).status, 200);
    expectOpenAiError(assert, await curl(s.url + '/health', { method: 'GET', headers: { Host: 'localhost' } }), 403);
  });
});
