// The fleet of issue 19 on loopback: three `tessera serve` replicas behind nginx (deploy/nginx) and a
// Prometheus (deploy/prometheus) scraping all three. 300 concurrent streams; then, under a steady load, one
// replica drains on SIGTERM and another dies on SIGKILL; the dead one restarts and rejoins; Prometheus sees
// every replica's queue and fires the replica-down alert.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { freePort, metrics, metricValue, sleep, startServer } from './harness.mjs';
import { DEPLOY, startNginx, startPrometheus, waitFor } from './fleet.mjs';
import { dashboardQueries, instantiate } from './promql.mjs';
import { closedLoopLoad, streamOnce } from './streams.mjs';

// Eight sequences per step and one thread each: with dozens of streams per replica most of them wait in the
// queue, which is what the failover checks need (a request still waiting has sent no byte).
const REPLICA_ARGS = ['--max-seqs', '8', '--no-result-cache', '--drain-timeout', '30'];
const addr = (port) => `127.0.0.1:${port}`;

let ports = [];
let replicas = [];
let nginx;
let prom;
before(async () => {
  ports = [await freePort(), await freePort(), await freePort()];
  replicas = await Promise.all(ports.map((port) => startServer(REPLICA_ARGS, { port })));
  nginx = await startNginx(ports.map(addr));
  // The replica-down alert waits 1 minute in alerts.yml (checked by promtool test rules); here 3 s.
  prom = await startPrometheus(ports.map(addr), { forOverrides: { TesseraReplicaDown: '3s' } });
});
after(async () => {
  await prom?.stop();
  await nginx?.stop();
  await Promise.all(replicas.map((r) => r.stop('SIGKILL')));
});

const finished = async (port) =>
  metricValue(await metrics(`http://${addr(port)}`), 'tessera_request_success_total') ?? 0;

test('300 concurrent streams through nginx all end with [DONE], spread over the three replicas', async () => {
  const before = await Promise.all(ports.map(finished));
  const records = await Promise.all(Array.from({ length: 300 }, (_, i) => streamOnce(nginx.url, `burst-${i}`)));
  const bad = records.filter((r) => !r.done);
  assert.deepEqual(bad.map((r) => `${r.rid}: ${r.status} ${r.error ?? r.text.slice(-200)}`), []);
  assert.ok(records.every((r) => r.chunks >= 2));
  const per = (await Promise.all(ports.map(finished))).map((n, i) => n - before[i]);
  console.log(`# per-replica requests (from /metrics): ${per.join(', ')}`);
  assert.equal(per.reduce((a, b) => a + b, 0), 300);
  for (const n of per) assert.ok(n >= 30, `uneven spread: ${per}`);
});

test('Prometheus has the queue metric of every replica, and every dashboard query runs', async () => {
  const instances = await waitFor(async () => {
    const r = await prom.query('tessera_num_requests_waiting');
    const seen = new Set(r.map((s) => s.metric.instance));
    return ports.every((p) => seen.has(addr(p))) && seen;
  }, 30000, 'tessera_num_requests_waiting from all three replicas');
  assert.equal(instances.size, 3);
  // The recording rules need traffic between two scrapes (the burst may have fallen before the first one):
  // a few streams per try until the fleet's P99 time to first token is a number.
  let n = 0;
  await waitFor(async () => {
    await Promise.all(Array.from({ length: 6 }, () => streamOnce(nginx.url, `rules-${n++}`)));
    return (await prom.query('model_name:tessera_time_to_first_token_seconds:p99_5m')).some((s) => s.value[1] > 0);
  }, 30000, 'the TTFT p99 recording rule', 500);
  const dashboard = JSON.parse(readFileSync(path.join(DEPLOY, 'grafana/tessera-fleet.json'), 'utf8'));
  let withData = 0;
  const queries = dashboardQueries(dashboard);
  for (const q of queries) {
    const result = await prom.query(instantiate(q.expr));  // throws on a query Prometheus rejects
    if (result.length) ++withData;
  }
  console.log(`# dashboard queries with data: ${withData} of ${queries.length}`);
  assert.ok(withData >= queries.length - 2, `${withData} of ${queries.length} queries have data`);
});

test('SIGTERM drains one replica, SIGKILL breaks only streams already under way, a restart rejoins', async () => {
  const [drained, killed, survivor] = [0, 1, 2];
  const load = closedLoopLoad(nginx.url, 48, 'load', {
    // Long enough that the killed replica is in the middle of several streams when it dies.
    body: { prompt: 'Once upon a time', max_tokens: 128, temperature: 0, stream: true },
  });
  await sleep(1500);

  const tTerm = Date.now();
  replicas[drained].proc.kill('SIGTERM');
  const { code } = await replicas[drained].exited;
  assert.equal(code, 0, 'the drained replica exits cleanly');
  const drainMs = Date.now() - tTerm;
  await sleep(1000);

  const tKill = Date.now();
  replicas[killed].proc.kill('SIGKILL');
  await replicas[killed].exited;
  await sleep(1500);
  const records = await load.stop();

  const log = await waitFor(() => {
    const byRid = new Map(nginx.accessLog().map((e) => [e.rid, e]));
    return records.every((r) => byRid.has(r.rid)) && byRid;
  }, 5000, 'every request in the access log');
  const entryOf = (r) => log.get(r.rid);
  const last = (r) => entryOf(r).upstreams.at(-1);

  const broken = records.filter((r) => !r.done);
  for (const r of broken) {
    // Only a stream that the killed replica had started answering may break.
    assert.ok(r.chunks >= 1, `${r.rid} broke before any byte: ${r.status} ${r.error} ${r.text.slice(-200)}`);
    assert.equal(last(r), addr(ports[killed]), `${r.rid} broke on ${last(r)}`);
    assert.ok(r.start < tKill);
  }
  // The drain: nothing broke there, and requests that came after SIGTERM went elsewhere.
  assert.equal(records.filter((r) => last(r) === addr(ports[drained]) && !r.done).length, 0);
  const late = records.filter((r) => r.start > tTerm + 200);
  assert.ok(late.length > 50);
  for (const r of late) assert.notEqual(last(r), addr(ports[drained]), `${r.rid} reached the draining replica`);
  for (const r of records.filter((x) => x.start > tKill + 200))
    assert.equal(last(r), addr(ports[survivor]), `${r.rid} after the kill`);
  // Requests the killed replica held without answering were tried again on a survivor and finished.
  const retried = records.filter((r) => r.done && entryOf(r).upstreams.slice(0, -1).includes(addr(ports[killed])));
  const onKilled = records.filter((r) => entryOf(r).upstreams.includes(addr(ports[killed])) && r.end >= tKill);
  console.log(`# drain took ${drainMs} ms; ${records.length} streams under load; ${onKilled.length} were on the ` +
    `killed replica at the kill: ${broken.length} broke mid-stream, ${retried.length} had not started and ` +
    `finished on a survivor, the rest had received their last byte`);
  assert.ok(retried.length >= 1, 'requests waiting on the killed replica are retried');
  assert.ok(records.length - broken.length > 100);

  // Prometheus: both stopped replicas are down, and the alert fires for them.
  const firing = await waitFor(async () => {
    const down = (await prom.alerts()).filter((a) => a.labels.alertname === 'TesseraReplicaDown' && a.state === 'firing');
    const instances = new Set(down.map((a) => a.labels.instance));
    return instances.has(addr(ports[killed])) && instances.has(addr(ports[drained])) && down;
  }, 30000, 'TesseraReplicaDown firing for the stopped replicas');
  assert.ok(firing.every((a) => a.labels.instance !== addr(ports[survivor])));

  // Restart the killed replica on its port: once /ready, nginx sends it requests again (after fail_timeout
  // at most) and every request through the balancer still completes.
  replicas[killed] = await startServer(REPLICA_ARGS, { port: ports[killed] });
  const waves = [];
  await waitFor(async () => {
    const wave = await Promise.all(Array.from({ length: 16 }, (_, i) => streamOnce(nginx.url, `rejoin-${waves.length}-${i}`)));
    waves.push(...wave);
    return (await finished(ports[killed])) > 0;
  }, 30000, 'the restarted replica to take requests', 500);
  assert.deepEqual(waves.filter((r) => !r.done).map((r) => `${r.rid}: ${r.status} ${r.error}`), []);
  console.log(`# the restarted replica took requests after ${waves.length} streams`);
});
