// /metrics: vLLM-mirroring names with the tessera_ prefix (clean for `promtool check metrics`), vLLM's exact names
// with --metrics-prefix vllm:, and scraped by a real Prometheus server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { BINARY, freePort, startServer, postJson, metrics, metricValue, sleep, tempDir } from './harness.mjs';

let server;
before(async () => {
  server = await startServer(['--api-key', 'sk-m', '--metrics-require-key']);
  const auth = { Authorization: 'Bearer sk-m' };
  await postJson(server.url + '/v1/completions', { prompt: 'Once upon a time', max_tokens: 8, temperature: 0 }, auth);
  await postJson(server.url + '/v1/completions', { prompt: 'Once upon a time', max_tokens: 8, temperature: 0 }, auth);
  const r = await fetch(server.url + '/v1/completions', {
    method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'Once', max_tokens: 8, stream: true }),
  });
  await r.text();
  await postJson(server.url + '/v1/completions', { prompt: 'x', temperature: -1 }, auth);
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0);
});

const NAMES = [
  'tessera_num_requests_waiting', 'tessera_num_requests_running', 'tessera_time_to_first_token_seconds_bucket',
  'tessera_inter_token_latency_seconds_bucket', 'tessera_e2e_request_latency_seconds_bucket',
  'tessera_request_queue_time_seconds_bucket', 'tessera_kv_cache_usage_perc', 'tessera_prefix_cache_hits_total',
  'tessera_prompt_tokens_total', 'tessera_generation_tokens_total', 'tessera_batch_size_bucket',
  'tessera_num_preemptions_total', 'tessera_request_rejections_total', 'tessera_request_timeouts_total',
  'tessera_request_cancellations_total', 'tessera_result_cache_hits_total', 'tessera_fallbacks_total',
  'tessera_http_errors_total',
];

test('metrics need the key when configured, and carry the vLLM-style names', async () => {
  assert.equal((await fetch(server.url + '/metrics')).status, 401);
  const text = await metrics(server.url, { Authorization: 'Bearer sk-m' });
  for (const name of NAMES) assert.ok(text.includes(name), name);
  assert.ok(metricValue(text, 'tessera_generation_tokens_total') >= 16);
  assert.ok(metricValue(text, 'tessera_prompt_tokens_total') > 0);
  assert.equal(metricValue(text, 'tessera_result_cache_hits_total'), 1);
  assert.equal(metricValue(text, 'tessera_http_errors_total{model_name="stories260K",status="400"}'), 1);
  assert.ok(metricValue(text, 'tessera_time_to_first_token_seconds_count') >= 2);
});

test('promtool check metrics passes cleanly on the default names', async () => {
  const text = await metrics(server.url, { Authorization: 'Bearer sk-m' });
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  assert.equal(r.error, undefined, 'promtool missing: scripts/setup.sh installs the Debian package prometheus');
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.equal((r.stdout + r.stderr).trim(), '');
});

// promtool 2.42 lints every name with a colon ("should not contain ':'"), vLLM's own names included, and vLLM's
// histogram vllm:iteration_tokens_total for its "_total": with --metrics-prefix vllm: those are the only
// problems allowed, as vLLM's exact names are the point.
test('--metrics-prefix vllm: exports vLLM\'s names; a bad prefix is refused', async () => {
  const v = await startServer(['--metrics-prefix', 'vllm:']);
  try {
    await postJson(v.url + '/v1/completions', { prompt: 'Once', max_tokens: 4 });
    const t = await metrics(v.url);
    for (const name of ['vllm:num_requests_waiting', 'vllm:num_requests_running', 'vllm:kv_cache_usage_perc',
      'vllm:gpu_cache_usage_perc', 'vllm:time_to_first_token_seconds_bucket', 'vllm:e2e_request_latency_seconds_bucket',
      'vllm:inter_token_latency_seconds_bucket', 'vllm:request_queue_time_seconds_bucket',
      'vllm:iteration_tokens_total_bucket', 'vllm:request_success_total', 'tessera_request_rejections_total']) {
      assert.ok(t.includes(name), name);
    }
    assert.ok(metricValue(t, 'vllm:generation_tokens_total') > 0);
    assert.ok(metricValue(t, 'vllm:prompt_tokens_total') > 0);
    const p = spawnSync('promtool', ['check', 'metrics'], { input: t, encoding: 'utf8' });
    assert.ok(p.status === 0 || p.status === 3, `promtool failed to parse: ${p.stdout}${p.stderr}`);
    const problems = (p.stdout + p.stderr).split('\n').filter((l) => l.trim() && !l.includes("should not contain ':'") &&
      !l.startsWith('vllm:iteration_tokens_total non-counter metrics should not have "_total" suffix'));
    assert.deepEqual(problems, []);
  } finally {
    await v.stop();
  }
  const bad = spawnSync(BINARY, ['serve', '--metrics-prefix', 'tessera-'],
    { encoding: 'utf8', timeout: 30000 });
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /letters, digits, '_' and ':'/);
});

test('a real Prometheus server scrapes it', async () => {
  const dir = tempDir();
  const keyFile = path.join(dir, 'key');
  writeFileSync(keyFile, 'sk-m');
  writeFileSync(path.join(dir, 'prometheus.yml'), [
    'global:', '  scrape_interval: 1s', 'scrape_configs:', '  - job_name: tessera',
    '    authorization:', `      credentials_file: ${keyFile}`,
    '    static_configs:', `      - targets: ['127.0.0.1:${server.port}']`, '',
  ].join('\n'));
  const port = await freePort();
  const prom = spawn('prometheus', [`--config.file=${path.join(dir, 'prometheus.yml')}`,
    `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
  { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  prom.stderr.on('data', (d) => { log += d; });
  try {
    const deadline = Date.now() + 45000;
    let value = null;
    while (Date.now() < deadline && value === null) {
      await sleep(500);
      assert.equal(prom.exitCode, null, `prometheus exited: ${log.slice(-2000)}`);
      try {
        const q = encodeURIComponent('tessera_generation_tokens_total');
        const r = await (await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${q}`)).json();
        if (r.data?.result?.length) value = Number(r.data.result[0].value[1]);
      } catch { /* not up yet */ }
    }
    assert.ok(value >= 16, `scraped value ${value}; ${log.slice(-1000)}`);
    const up = await (await fetch(`http://127.0.0.1:${port}/api/v1/query?query=up`)).json();
    assert.equal(up.data.result[0].value[1], '1');
  } finally {
    prom.kill('SIGKILL');
  }
});
