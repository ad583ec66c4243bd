// deploy/grafana's dashboard and deploy/prometheus's rules against the real /metrics: every metric a panel, a
// recording rule or an alert reads is one that `tessera serve` exports (or Prometheus' own `up`, or a
// kube-state-metrics series on Kubernetes).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { startServer, postJson, metrics } from './harness.mjs';
import { DEPLOY, nodePackage } from './fleet.mjs';
import { dashboardQueries, expandRecorded, exportedNames, metricNames, recordingRules } from './promql.mjs';

const dashboard = JSON.parse(readFileSync(path.join(DEPLOY, 'grafana/tessera-fleet.json'), 'utf8'));
const YAML = nodePackage('yaml');
const rules = recordingRules(YAML.parse(readFileSync(path.join(DEPLOY, 'prometheus/rules.yml'), 'utf8')));
const alerts = YAML.parse(readFileSync(path.join(DEPLOY, 'prometheus/alerts.yml'), 'utf8'));
// Series that come from Prometheus itself or from kube-state-metrics, not from the replicas.
const NOT_TESSERA = new Set(['up', 'kube_horizontalpodautoscaler_status_current_replicas',
  'kube_horizontalpodautoscaler_spec_max_replicas', 'kube_pod_container_status_restarts_total',
  'kube_pod_container_status_last_terminated_reason']);

let exported;
before(async () => {
  const s = await startServer();
  try {
    await postJson(s.url + '/v1/completions', { prompt: 'Once upon a time', max_tokens: 4 });
    await postJson(s.url + '/v1/completions', { prompt: 'x', temperature: -1 });  // an error series
    exported = exportedNames(await metrics(s.url));
  } finally {
    await s.stop();
  }
});

function missing(names) {
  return [...names].filter((n) => !exported.has(n) && !NOT_TESSERA.has(n));
}

test('the dashboard parses, its panels are well formed and its variables defined', () => {
  assert.equal(typeof dashboard.title, 'string');
  assert.ok(dashboard.uid);
  const ids = new Set();
  const variables = new Set(dashboard.templating.list.map((v) => v.name));
  for (const p of dashboard.panels) {
    assert.ok(!ids.has(p.id), `duplicate panel id ${p.id}`);
    ids.add(p.id);
    for (const k of ['h', 'w', 'x', 'y']) assert.equal(typeof p.gridPos?.[k], 'number', `${p.title}: gridPos.${k}`);
    assert.ok(p.targets?.length, `${p.title}: no queries`);
    const refs = new Set();
    for (const t of p.targets) {
      assert.ok(t.expr && t.refId && !refs.has(t.refId), `${p.title}: target ${t.refId}`);
      refs.add(t.refId);
      for (const v of t.expr.matchAll(/\$\{?([a-zA-Z_]+)\}?/g))
        assert.ok(v[1].startsWith('__') || variables.has(v[1]), `${p.title}: undefined variable $${v[1]}`);
    }
  }
  // What the issue asks the dashboard to show, each found in some query.
  const used = new Set(dashboardQueries(dashboard).flatMap((q) => [...metricNames(q.expr)]));
  for (const name of ['tessera_generation_tokens_total', 'tessera_time_to_first_token_seconds_bucket',
    'tessera_inter_token_latency_seconds_bucket', 'tessera_e2e_request_latency_seconds_bucket',
    'tessera_num_requests_waiting', 'tessera_num_requests_running', 'tessera_kv_cache_usage_perc',
    'tessera_batch_size_bucket', 'tessera_prefix_cache_hits_total', 'tessera_result_cache_hits_total',
    'tessera_num_preemptions_total', 'tessera_fallbacks_total', 'tessera_http_errors_total'])
    assert.ok(used.has(name), `no panel shows ${name}`);
});

test('every metric the dashboard queries is exported by /metrics', () => {
  const queries = dashboardQueries(dashboard);
  assert.ok(queries.length >= 20, `only ${queries.length} queries`);
  for (const q of queries) {
    const names = expandRecorded(metricNames(q.expr), rules);
    assert.ok(names.size > 0, `${q.panel}/${q.refId}: no metric in ${q.expr}`);
    assert.deepEqual(missing(names), [], `${q.panel}/${q.refId}: ${q.expr}`);
  }
});

test('every metric the recording rules and alerts read is exported by /metrics', () => {
  for (const [record, expr] of rules) assert.deepEqual(missing(expandRecorded(metricNames(expr), rules)), [], record);
  for (const g of alerts.groups) {
    for (const r of g.rules) {
      const names = expandRecorded(metricNames(r.expr), rules);
      assert.ok(names.size > 0, r.alert);
      assert.deepEqual(missing(names), [], r.alert);
    }
  }
});

test('a name /metrics does not export is caught', () => {
  assert.deepEqual(missing(metricNames('rate(tessera_tokens_generated_total[5m])')), ['tessera_tokens_generated_total']);
  assert.deepEqual(missing(expandRecorded(new Set(['model_name:tessera_http_5xx:ratio_rate5m']), rules)), []);
});
