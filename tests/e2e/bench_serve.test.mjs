// `tessera bench serve` against the real `tessera serve` on the embedded model: closed-loop and Poisson load on
// /v1/completions (token-id prompts) and /v1/chat/completions, with exact token counts under ignore_eos; and a
// closed port fails fast with one clear message.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createServer } from 'node:net';
import { startServer, BINARY } from './harness.mjs';

let server;
before(async () => { server = await startServer(['--no-result-cache']); });
after(async () => { await server?.stop(); });

// Runs `tessera bench serve ARGS`; never rejects: the exit code, stdout and stderr come back.
function benchServe(args, timeoutMs = 20000) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    execFile(BINARY, ['bench', 'serve', ...args], { timeout: timeoutMs, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? 1) : 0, killed: err?.killed ?? false, stdout, stderr, ms: Date.now() - t0 });
    });
  });
}

// The embedded model's vocabulary has 512 ids: random prompts draw below it.
const WORKLOAD = ['--num-prompts', '8', '--input-len', '16', '--output-len', '8', '--token-max', '512', '--json'];

function checkReport(r, { inputTokens } = {}) {
  assert.equal(r.code, 0, `exit ${r.code}: ${r.stderr}`);
  const j = JSON.parse(r.stdout);
  assert.equal(j.completed, 8, r.stdout);
  assert.equal(j.failed, 0, r.stdout);
  assert.deepEqual(j.failures, { connect: 0, http: 0, truncated: 0, timeout: 0, stream_error: 0 });
  assert.equal(j.total_output_tokens, 8 * 8, 'ignore_eos: every request runs to max_tokens');
  assert.equal(j.mean_output_tokens, 8);
  if (inputTokens !== undefined) assert.equal(j.total_input_tokens, inputTokens);
  else assert.ok(j.total_input_tokens > 0);
  for (const key of ['duration_s', 'request_throughput', 'output_throughput', 'total_token_throughput',
    'mean_input_tokens']) {
    assert.equal(typeof j[key], 'number', key);
    assert.ok(j[key] > 0, `${key} = ${j[key]}`);
  }
  for (const key of ['ttft_ms', 'tpot_ms', 'itl_ms', 'e2e_ms']) {
    for (const stat of ['mean', 'median', 'p90', 'p99']) assert.equal(typeof j[key][stat], 'number', `${key}.${stat}`);
  }
  assert.equal(j.ttft_ms.n, 8);
  assert.equal(j.e2e_ms.n, 8);
  assert.ok(j.ttft_ms.max <= j.e2e_ms.max && j.ttft_ms.mean <= j.e2e_ms.mean, r.stdout);
  assert.ok(j.ttft_ms.median <= j.ttft_ms.p90 && j.ttft_ms.p90 <= j.ttft_ms.p99);
  assert.ok(Math.abs(j.request_throughput - 8 / j.duration_s) < 1e-6 * j.request_throughput);
  assert.ok(Math.abs(j.output_throughput - 64 / j.duration_s) < 1e-6 * j.output_throughput);
  return j;
}

test('concurrency 4: every request completes with exactly output-len tokens', async () => {
  const r = await benchServe(['--base-url', server.url, '--concurrency', '4', '--label', 'e2e', ...WORKLOAD]);
  const j = checkReport(r, { inputTokens: 8 * 16 });
  assert.equal(j.label, 'e2e');
  assert.equal(j.load, 'concurrency 4');
  assert.equal(j.endpoint, '/v1/completions');
  assert.equal(j.goodput, undefined, 'no SLO, no goodput');
});

test('Poisson arrivals at 50 req/s, with SLOs and goodput', async () => {
  const r = await benchServe(['--base-url', server.url, '--request-rate', '50', '--seed', '3',
    '--slo-e2e-ms', '60000', '--slo-ttft-ms', '60000', ...WORKLOAD]);
  const j = checkReport(r, { inputTokens: 8 * 16 });
  assert.match(j.load, /^request rate 50\/s/);
  assert.equal(j.good_requests, 8);
  assert.ok(Math.abs(j.goodput - j.request_throughput) < 1e-9);
  assert.ok(j.duration_s > 0.02, `7 gaps of ~20 ms, got ${j.duration_s} s`);
});

test('chat endpoint with random words', async () => {
  const r = await benchServe(['--base-url', server.url, '--endpoint', 'chat', '--concurrency', '2', ...WORKLOAD]);
  const j = checkReport(r);
  assert.equal(j.endpoint, '/v1/chat/completions');
});

test('the human-readable report', async () => {
  const args = ['--base-url', server.url, '--concurrency', '2', ...WORKLOAD.filter((a) => a !== '--json')];
  const r = await benchServe(args);
  assert.equal(r.code, 0, r.stderr);
  for (const line of [/Successful requests:\s+8\n/, /Failed requests:\s+0\n/, /Total generated tokens:\s+64\n/,
    /Mean TTFT \(ms\):\s+[\d.]+\n/, /P99 TPOT \(ms\):\s+[\d.]+\n/, /Median ITL \(ms\):\s+[\d.]+\n/,
    /P90 E2E \(ms\):\s+[\d.]+\n/, /Output token throughput \(tok\/s\):\s+[\d.]+\n/]) {
    assert.match(r.stdout, line);
  }
});

test('a request the server rejects fails the run with the report still printed', async () => {
  // Ids up to 30000 are outside the 512-id vocabulary: HTTP 400 for each.
  const r = await benchServe(['--base-url', server.url, '--concurrency', '2', '--num-prompts', '3',
    '--output-len', '2', '--warmup', '0', '--json']);
  assert.notEqual(r.code, 0);
  const j = JSON.parse(r.stdout);
  assert.equal(j.completed, 0);
  assert.equal(j.failures.http, 3);
  assert.match(r.stderr, /3 of 3 requests failed \(http 3\).*out of range/);
});

test('a closed port: non-zero exit with a clear message, quickly', async () => {
  const port = await new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
  const r = await benchServe(['--base-url', `http://127.0.0.1:${port}`, '--concurrency', '4', ...WORKLOAD], 10000);
  assert.equal(r.killed, false, 'it must not hang');
  assert.notEqual(r.code, 0);
  const expected = `^error: cannot connect to http://127\\.0\\.0\\.1:${port}: Connection refused\\n$`;
  assert.match(r.stderr, new RegExp(expected));
  assert.equal(r.stdout, '');
  assert.ok(r.ms < 5000, `took ${r.ms} ms`);
});

test('https and garbage URLs are refused', async () => {
  for (const [url, message] of [['https://127.0.0.1:8443', /https is not supported/],
    ['127.0.0.1:8080', /must start with http:\/\//], ['http://host:99999', /port must be a number/]]) {
    const r = await benchServe(['--base-url', url, '--concurrency', '1']);
    assert.equal(r.code, 1, `${url}: ${r.stderr}`);
    assert.match(r.stderr, message);
  }
});
