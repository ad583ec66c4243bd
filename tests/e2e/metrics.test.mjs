// /metrics: vLLM-mirroring names with the tessera: prefix, valid for `promtool check metrics`, and scraped by a
// real Prometheus server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { startServer, postJson, metrics, metricValue, sleep, tempDir } from './harness.mjs';

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
  'tessera:num_requests_waiting', 'tessera:num_requests_running', 'tessera:time_to_first_token_seconds_bucket',
  'tessera:inter_token_latency_seconds_bucket', 'tessera:e2e_request_latency_seconds_bucket',
  'tessera:request_queue_time_seconds_bucket', 'tessera:kv_cache_usage_perc', 'tessera:prefix_cache_hits_total',
  'tessera:prompt_tokens_total', 'tessera:generation_tokens_total', 'tessera:batch_size_bucket',
  'tessera:num_preemptions_total', 'tessera:request_rejections_total', 'tessera:request_timeouts_total',
  'tessera:request_cancellations_total', 'tessera:result_cache_hits_total', 'tessera:fallbacks_total',
  'tessera:http_errors_total',
];

test('metrics need the key when configured, and carry the vLLM-style names', async () => {
  assert.equal((await fetch(server.url + '/metrics')).status, 401);
  const text = await metrics(server.url, { Authorization: 'Bearer sk-m' });
  for (const name of NAMES) assert.ok(text.includes(name), name);
  assert.ok(metricValue(text, 'tessera:generation_tokens_total') >= 16);
  assert.ok(metricValue(text, 'tessera:prompt_tokens_total') > 0);
  assert.equal(metricValue(text, 'tessera:result_cache_hits_total'), 1);
  assert.equal(metricValue(text, 'tessera:http_errors_total{model_name="stories260K",status="400"}'), 1);
  assert.ok(metricValue(text, 'tessera:time_to_first_token_seconds_count') >= 2);
});

// promtool 2.42 lints every name with a colon ("should not contain ':'"), vLLM's own `vllm:` names included.
// The default names keep vLLM's style, so that lint is the only problem allowed there; with
// --metrics-prefix tessera_ the check passes outright.
test('promtool check metrics: parses, and passes with --metrics-prefix tessera_', async () => {
  const text = await metrics(server.url, { Authorization: 'Bearer sk-m' });
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  assert.equal(r.error, undefined, 'promtool missing: scripts/setup.sh installs the Debian package prometheus');
  assert.ok(r.status === 0 || r.status === 3, `promtool failed to parse: ${r.stdout}${r.stderr}`);
  const problems = (r.stdout + r.stderr).split('\n').filter((l) => l.trim() && !l.includes("should not contain ':'"));
  assert.deepEqual(problems, []);

  const plain = await startServer(['--metrics-prefix', 'tessera_']);
  try {
    await postJson(plain.url + '/v1/completions', { prompt: 'Once', max_tokens: 4 });
    const t = await metrics(plain.url);
    assert.ok(t.includes('tessera_num_requests_running'));
    const p = spawnSync('promtool', ['check', 'metrics'], { input: t, encoding: 'utf8' });
    assert.equal(p.status, 0, p.stdout + p.stderr);
  } finally {
    await plain.stop();
  }
});

async function freePort() {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
  });
}

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
        const q = encodeURIComponent('tessera:generation_tokens_total');
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
