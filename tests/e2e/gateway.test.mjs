// Gateway features, each with a test that fails without it: client disconnect cancels, deadlines, rate
// limits, the bounded queue, the result cache, the fallback replica and readiness under NaN logits, graceful
// drain.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import net from 'node:net';
import {
  HERE, BINARY, startServer, withServer, postJson, metrics, metricValue, tesseraMetric, sleep, directRun, tempDir,
  expectOpenAiError, EMBEDDED_GGUF,
} from './harness.mjs';

const LONG = { prompt: 'Once upon a time', max_tokens: 480, temperature: 0, ignore_eos: true };

// Opens a streaming request and resolves once its first chunk arrived; returns the reader and controller.
async function openStream(url, body, headers = {}) {
  const controller = new AbortController();
  const r = await fetch(url + '/v1/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify({ ...body, stream: true }), signal: controller.signal,
  });
  assert.equal(r.status, 200);
  const reader = r.body.getReader();
  const first = await reader.read();
  assert.ok(!first.done);
  return { reader, controller };
}

async function readAll(reader) {
  let text = '';
  const dec = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text;
    text += dec.decode(value, { stream: true });
  }
}

async function waitFor(cond, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await cond()) return;
    await sleep(25);
  }
  assert.fail(`timed out waiting for ${what}`);
}

test('client disconnect cancels the sequence and frees its blocks', async () => {
  await withServer(['--max-seqs', '4'], async (s) => {
    const { controller } = await openStream(s.url, LONG);
    controller.abort();
    await waitFor(async () => metricValue(await metrics(s.url), 'tessera_request_cancellations_total') >= 1, 3000,
      'a cancellation');
    await waitFor(async () => {
      const m = await metrics(s.url);
      return metricValue(m, 'tessera_num_requests_running') === 0 && metricValue(m, 'tessera_kv_cache_usage_perc') === 0;
    }, 3000, 'the blocks to be freed');
    const m = await metrics(s.url);
    assert.equal(metricValue(m, 'tessera_request_success_total{finished_reason="length"') ?? 0, 0,
      'the aborted request must not run to its length');
  });
});

test('deadline: finish_reason timeout mid-stream, 504 when nothing was sent', async () => {
  await withServer(['--max-seqs', '1', '--no-result-cache'], async (s) => {
    // Nothing can be generated in 1 ms while another request holds the only sequence slot: 504.
    const { reader } = await openStream(s.url, LONG);
    const res = await postJson(s.url + '/v1/completions', { ...LONG, timeout_ms: 1 });
    expectOpenAiError(assert, res, 504);
    const hdr = await postJson(s.url + '/v1/completions', LONG, { 'X-Timeout-Ms': '1' });
    expectOpenAiError(assert, hdr, 504);
    await reader.cancel();
    await waitFor(async () => metricValue(await metrics(s.url), 'tessera_num_requests_running') === 0, 3000, 'idle');
    // A deadline that passes mid-generation: finish_reason "timeout" with partial text. The deadline is a third
    // of what the whole generation takes on this machine.
    const t0 = Date.now();
    assert.equal((await postJson(s.url + '/v1/completions', LONG)).status, 200);
    const full = Date.now() - t0;
    const r = await fetch(s.url + '/v1/completions', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ...LONG, stream: true, timeout_ms: Math.max(5, Math.floor(full / 3)) }),
    });
    const body = await r.text();
    assert.ok(body.includes('"finish_reason":"timeout"'), body.slice(-400));
    assert.ok(body.trimEnd().endsWith('data: [DONE]'));
    const m = await metrics(s.url);
    assert.ok(metricValue(m, 'tessera_request_timeouts_total') >= 3);
    await waitFor(async () => metricValue(await metrics(s.url), 'tessera_kv_cache_usage_perc') === 0, 3000, 'blocks freed');
  });
});

test('priority reaches the scheduler: a high-priority request preempts a running low-priority one', async () => {
  await withServer(['--max-seqs', '1', '--no-result-cache'], async (s) => {
    const { reader } = await openStream(s.url, { ...LONG, priority: 10 });
    const lowDone = readAll(reader).then((t) => ({ t, at: Date.now() }));
    const high = await postJson(s.url + '/v1/completions', { prompt: 'Once', max_tokens: 8, temperature: 0 },
      { 'X-Priority': '-10' });
    const highAt = Date.now();
    assert.equal(high.status, 200, high.text);
    const low = await lowDone;
    assert.ok(high.json.choices[0].text.length > 0);
    assert.ok(highAt < low.at, 'the high-priority request must not wait for the low one to finish');
    assert.ok(low.t.includes('"finish_reason":"length"'), 'the preempted request resumes and completes');
    assert.ok(metricValue(await metrics(s.url), 'tessera_num_preemptions_total') >= 1);
  });
});

test('rate limits: requests per second and tokens per minute give 429 with Retry-After', async () => {
  const args = ['--api-key', 'k1', '--api-key', 'k2', '--rate-limit-rps', '1', '--rate-limit-burst', '2',
    '--rate-limit-tpm', '600', '--no-result-cache'];
  await withServer(args, async (s) => {
    const small = { prompt: 'Once', max_tokens: 1 };
    const k1 = { Authorization: 'Bearer k1' };
    assert.equal((await postJson(s.url + '/v1/completions', small, k1)).status, 200);
    assert.equal((await postJson(s.url + '/v1/completions', small, k1)).status, 200);
    const limited = await postJson(s.url + '/v1/completions', small, k1);
    expectOpenAiError(assert, limited, 429);
    assert.equal(limited.json.error.code, 'rate_limit_exceeded');
    assert.ok(Number(limited.headers.get('retry-after')) >= 1);
    // Another key has its own buckets; a request past its token budget is refused.
    const k2 = { Authorization: 'Bearer k2' };
    assert.equal((await postJson(s.url + '/v1/completions', { ...LONG, max_tokens: 500 }, k2)).status, 200);
    const tokens = await postJson(s.url + '/v1/completions', { ...LONG, max_tokens: 300 }, k2);
    expectOpenAiError(assert, tokens, 429);
    assert.ok(Number(tokens.headers.get('retry-after')) >= 5);
    const m = await metrics(s.url, k1);  // with keys, /metrics needs one too
    assert.equal(metricValue(m, 'tessera_request_rejections_total{model_name="stories260K",reason="rate_limit"}'), 2);
  });
});

// A random-weight 0.5B model on the server's one thread: a prefill of 1000 tokens lasts seconds, and so does a
// decode of a few hundred, where stories260K finishes 480 tokens in a fraction of a second. Made once per file.
let slowModelPath = null;
function slowModel() {
  if (!slowModelPath) {
    const model = path.join(tempDir(), 'q05.gguf');
    execFileSync(BINARY, ['make-model', '--preset', 'qwen2.5-0.5b', '--type', 'q4_0', '-o', model, '-t', '2'], { stdio: 'ignore' });
    slowModelPath = model;
  }
  return slowModelPath;
}

// The running request must outlast the waiting one's arrival and the rejected one: with stories260K the running
// stream could finish first, promote the waiting one and admit the third (a flaky 200 instead of 429).
test('queue full: 429 once --max-queue requests wait', { timeout: 120000 }, async () => {
  await withServer(['-m', slowModel(), '-c', '1024', '--max-seqs', '1', '--max-queue', '1', '--no-result-cache'], async (s) => {
    const { reader } = await openStream(s.url, LONG);  // running
    const waiting = fetch(s.url + '/v1/completions', {  // waiting
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...LONG, stream: true }),
    });
    await waitFor(async () => metricValue(await metrics(s.url), 'tessera_num_requests_waiting') === 1, 5000, 'a waiting request');
    const full = await postJson(s.url + '/v1/completions', LONG);
    expectOpenAiError(assert, full, 429);
    assert.equal(full.json.error.code, 'queue_full');
    assert.ok(full.headers.get('retry-after'));
    await reader.cancel();
    await (await waiting).body.cancel();
    const m = await metrics(s.url);
    assert.equal(metricValue(m, 'tessera_request_rejections_total{model_name="q05",reason="queue_full"}'), 1);
  });
});

// Regression: --max-queue was compared with a count the engine publishes once per step, so a burst during a long
// prefill was admitted whole. Admission is a reservation now. The slow model makes the prefill of 1000 prompt
// tokens last seconds; the burst of 200 arrives meanwhile.
test('queue bound: a burst of 200 during a long prefill against --max-queue 8, exactly the overflow gets 429', { timeout: 240000 }, async () => {
  await withServer(['-m', slowModel(), '-c', '1100', '--max-batched-tokens', '1100', '--max-queue', '8', '--no-result-cache'],
    async (s) => {
      const prefill = postJson(s.url + '/v1/completions', { prompt: Array.from({ length: 1000 }, (_, i) => 100 + i), max_tokens: 1 });
      await sleep(300);
      const t0 = Date.now();
      const burst = await Promise.all(Array.from({ length: 200 }, (_, i) =>
        postJson(s.url + '/v1/completions', { prompt: [5, 6, 7 + i], max_tokens: 1 })));
      const prefilled = await prefill;
      const statuses = burst.map((r) => r.status);
      const summary = JSON.stringify({ ok: statuses.filter((x) => x === 200).length,
        queue_full: burst.filter((r) => r.json?.error?.code === 'queue_full').length, burst_ms: Date.now() - t0 });
      assert.equal(prefilled.status, 200, prefilled.text);
      assert.equal(statuses.filter((x) => x === 429).length, 192, summary);
      assert.equal(statuses.filter((x) => x === 200).length, 8, summary);
      assert.ok(burst.every((r) => r.status === 200 || r.json.error.code === 'queue_full'), summary);
    });
});

test('result cache: a repeated deterministic request is a hit; --no-result-cache turns it off', async () => {
  const req = { prompt: 'Once upon a time', max_tokens: 24, temperature: 0 };
  await withServer([], async (s) => {
    const a = await postJson(s.url + '/v1/completions', req);
    assert.equal(a.headers.get('x-tessera-cache'), null);
    const b = await postJson(s.url + '/v1/completions', req);
    assert.equal(b.headers.get('x-tessera-cache'), 'hit');
    assert.equal(b.json.choices[0].text, a.json.choices[0].text);
    assert.deepEqual(b.json.usage, a.json.usage);
    const sampled = { ...req, temperature: 1 };  // no seed: never cached
    await postJson(s.url + '/v1/completions', sampled);
    assert.equal((await postJson(s.url + '/v1/completions', sampled)).headers.get('x-tessera-cache'), null);
    const r = await fetch(s.url + '/v1/completions', {  // a hit replays as a stream too
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...req, stream: true }),
    });
    assert.equal(r.headers.get('x-tessera-cache'), 'hit');
    const body = await r.text();
    assert.ok(body.endsWith('data: [DONE]\n\n'));
    assert.equal(metricValue(await metrics(s.url), 'tessera_result_cache_hits_total'), 2);
  });
  await withServer(['--no-result-cache'], async (s) => {
    await postJson(s.url + '/v1/completions', req);
    assert.equal((await postJson(s.url + '/v1/completions', req)).headers.get('x-tessera-cache'), null);
    assert.equal(metricValue(await metrics(s.url), 'tessera_result_cache_hits_total'), 0);
  });
});

// One token's embedding row is NaN (the output projection an intact copy): a request holding that token fails
// inside the engine, the engine itself is fine.
const POISON = 500;  // not in the health probe's prompt
function modelWithNaN(name, ...where) {
  const file = path.join(tempDir(), name);
  execFileSync('python3', [path.join(HERE, 'make_nan_model.py'), EMBEDDED_GGUF, file, ...where]);
  return file;
}
const greedy = (prompt, max_tokens = 20) => ({ prompt, max_tokens, temperature: 0 });

test('fallback: while the primary fails its probes, requests go to the fallback and are cached under its name', async () => {
  const nan = modelWithNaN('nan.gguf');
  const expected = await directRun('Once upon a time', 20);
  await withServer(['-m', nan, '--fallback-model', EMBEDDED_GGUF, '--served-model-name', 'stories260K',
    '--health-check-interval', '0.2'], async (s) => {
    const ready = await fetch(s.url + '/ready');
    assert.equal(ready.status, 200);
    assert.deepEqual(await ready.json(), { ready: true, primary: 'failed', fallback: 'ok', draining: false });
    const r = await postJson(s.url + '/v1/completions', greedy('Once upon a time'));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.choices[0].text, expected);
    const st = await fetch(s.url + '/v1/completions', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ...greedy('Once upon a time'), stream: true, temperature: 0.5, seed: 1 }),
    });
    assert.ok((await st.text()).trimEnd().endsWith('data: [DONE]'));
    // Routed to the fallback, not tried on the primary first and re-run.
    assert.equal(tesseraMetric(await metrics(s.url), 'fallbacks_total'), 0);
    assert.equal((await postJson(s.url + '/v1/completions', greedy('Once upon a time'))).headers.get('x-tessera-cache'), 'hit');
    // The primary is probed again on the interval while it is bad.
    await sleep(1000);
    assert.ok(s.stderr.split('the primary model failed its health probe').length - 1 >= 3, s.stderr);
  });
});

test('fallback: a request that fails on the primary re-runs on the fallback; the primary stays in service', async () => {
  const poisoned = modelWithNaN('poisoned.gguf', '--poison-token', String(POISON));
  await withServer(['-m', poisoned, '--fallback-model', EMBEDDED_GGUF, '--served-model-name', 'stories260K'], async (s) => {
    const body = { prompt: [1, 403, POISON, 407], max_tokens: 12, temperature: 0 };
    const r = await postJson(s.url + '/v1/completions', body);
    assert.equal(r.status, 200, r.text);
    assert.ok(r.json.choices[0].text.length > 0);
    assert.equal(tesseraMetric(await metrics(s.url), 'fallbacks_total'), 1);
    await sleep(300);  // the probe the failure asked for passes
    const ready = await (await fetch(s.url + '/ready')).json();
    assert.equal(ready.primary, 'ok', JSON.stringify(ready));
    // The fallback's answer is cached under the fallback's name: with the primary healthy it is no hit.
    const again = await postJson(s.url + '/v1/completions', body);
    assert.equal(again.status, 200);
    assert.equal(again.headers.get('x-tessera-cache'), null);
    assert.equal(tesseraMetric(await metrics(s.url), 'fallbacks_total'), 2);
    const plain = await postJson(s.url + '/v1/completions', greedy('Once upon a time'));
    assert.equal(plain.json.choices[0].text, await directRun('Once upon a time', 20));
  });
});

test('readiness: one request with non-finite logits does not take a healthy replica out of service', async () => {
  const poisoned = modelWithNaN('poisoned.gguf', '--poison-token', String(POISON));
  await withServer(['-m', poisoned], async (s) => {
    const r = await postJson(s.url + '/v1/completions', { prompt: [1, 403, POISON], max_tokens: 4, temperature: 0 });
    expectOpenAiError(assert, r, 500);
    await sleep(300);  // the probe the failure asked for passes
    assert.equal((await fetch(s.url + '/ready')).status, 200);
    assert.equal((await postJson(s.url + '/v1/completions', greedy('Once upon a time', 4))).status, 200);
    assert.ok(!s.stderr.includes('failed its health probe'), s.stderr);
  });
  // A broken engine (every forward pass NaN) fails its probes: not ready, and requests get a 503 to retry.
  const nan = modelWithNaN('nan.gguf');
  await withServer(['-m', nan], async (s) => {
    const r = await postJson(s.url + '/v1/completions', greedy('Once upon a time', 5));
    expectOpenAiError(assert, r, 503);
    assert.ok(r.headers.get('retry-after'));
    assert.equal((await fetch(s.url + '/ready')).status, 503);
    assert.equal((await fetch(s.url + '/health')).status, 200);
    // Not ready: a 503 a balancer passes on to another replica, not another failed generation.
    const again = await postJson(s.url + '/v1/completions', { prompt: 'Once upon a time', max_tokens: 5 });
    expectOpenAiError(assert, again, 503);
    assert.ok(again.headers.get('retry-after'));
    assert.match(again.json.error.message, /no fallback model|warming up/);
    const m = await metrics(s.url);
    assert.ok(metricValue(m, 'tessera_request_rejections_total{model_name="nan",reason="not_ready"}') >= 1);
  }, { waitReady: false });
});

test('drain on SIGTERM: in-flight streams finish, new connections are refused, exit 0', async () => {
  const s = await startServer(['--max-seqs', '4', '--drain-timeout', '30']);
  try {
    const { reader } = await openStream(s.url, { ...LONG, max_tokens: 200 });
    s.proc.kill('SIGTERM');
    await sleep(100);
    const refused = await new Promise((resolve) => {
      const sock = net.connect(s.port, '127.0.0.1');
      sock.on('connect', () => { sock.destroy(); resolve(false); });
      sock.on('error', () => resolve(true));
    });
    assert.ok(refused, 'new connections must be refused while draining');
    const rest = await readAll(reader);
    assert.ok(rest.includes('"finish_reason":"length"'), rest.slice(-300));
    assert.ok(rest.trimEnd().endsWith('data: [DONE]'));
    const { code } = await s.exited;
    assert.equal(code, 0);
  } finally {
    await s.stop('SIGKILL');
  }
  // A drain timeout shorter than the request: it is cancelled, the stream still ends cleanly, exit 0.
  const t = await startServer(['--max-seqs', '4', '--drain-timeout', '0.2']);
  try {
    const { reader } = await openStream(t.url, LONG);
    t.proc.kill('SIGTERM');
    const rest = await readAll(reader);
    assert.ok(rest.trimEnd().endsWith('data: [DONE]'), rest.slice(-300));
    const { code } = await t.exited;
    assert.equal(code, 0);
  } finally {
    await t.stop('SIGKILL');
  }
});
