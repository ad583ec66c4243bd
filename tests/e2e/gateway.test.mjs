// Gateway features, each with a test that fails without it: client disconnect cancels, deadlines, rate
// limits, the bounded queue, the result cache, the fallback replica on NaN logits, graceful drain.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import net from 'node:net';
import {
  HERE, startServer, postJson, metrics, metricValue, sleep, directRun, tempDir, expectOpenAiError, EMBEDDED_GGUF,
} from './harness.mjs';

const LONG = { prompt: 'Once upon a time', max_tokens: 480, temperature: 0, ignore_eos: true };

async function withServer(args, fn, opts) {
  const server = await startServer(args, opts);
  try {
    return await fn(server);
  } finally {
    await server.stop('SIGKILL');
  }
}

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
    const m = await metrics(s.url);
    assert.equal(metricValue(m, 'tessera_request_rejections_total{model_name="stories260K",reason="rate_limit"}'), 2);
  });
});

test('queue full: 429 once --max-queue requests wait', async () => {
  await withServer(['--max-seqs', '1', '--max-queue', '1', '--no-result-cache'], async (s) => {
    const { reader } = await openStream(s.url, LONG);  // running
    const waiting = fetch(s.url + '/v1/completions', {  // waiting
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...LONG, stream: true }),
    });
    await waitFor(async () => metricValue(await metrics(s.url), 'tessera_num_requests_waiting') === 1, 3000, 'a waiting request');
    const full = await postJson(s.url + '/v1/completions', LONG);
    expectOpenAiError(assert, full, 429);
    assert.equal(full.json.error.code, 'queue_full');
    assert.ok(full.headers.get('retry-after'));
    await reader.cancel();
    await (await waiting).body.cancel();
    const m = await metrics(s.url);
    assert.equal(metricValue(m, 'tessera_request_rejections_total{model_name="stories260K",reason="queue_full"}'), 1);
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

test('fallback: NaN logits on the primary re-run on the fallback model, counted', async () => {
  const dir = tempDir();
  const nan = path.join(dir, 'nan.gguf');
  execFileSync('python3', [path.join(HERE, 'make_nan_model.py'), EMBEDDED_GGUF, nan]);
  const expected = await directRun('Once upon a time', 20);
  await withServer(['-m', nan, '--fallback-model', EMBEDDED_GGUF, '--served-model-name', 'stories260K', '--no-result-cache'],
    async (s) => {
      const r = await postJson(s.url + '/v1/completions', { prompt: 'Once upon a time', max_tokens: 20, temperature: 0 });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.choices[0].text, expected);
      const st = await fetch(s.url + '/v1/completions', {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 20, temperature: 0, stream: true }),
      });
      const body = await st.text();
      const text = body.split('\n\n').filter((e) => e.startsWith('data: {'))
        .map((e) => JSON.parse(e.slice(6)).choices[0]?.text ?? '').join('');
      assert.equal(text, expected);
      assert.ok(metricValue(await metrics(s.url), 'tessera_fallbacks_total') >= 2);
    });
  // Without a fallback the failure is an error, and /ready turns false.
  await withServer(['-m', nan], async (s) => {
    const r = await postJson(s.url + '/v1/completions', { prompt: 'Once upon a time', max_tokens: 5, temperature: 0 });
    assert.ok(r.status >= 500, r.text);
    assert.ok(r.json.error);
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
