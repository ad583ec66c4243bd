// deploy/nginx in front of real `tessera serve` replicas, and of a recording upstream (a small Node server that
// keeps what nginx sent it and answers as the request's X-Spy header says) for what a replica does not show:
// the headers nginx adds, unbuffered SSE, and how nginx treats each status.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { promisify } from 'node:util';
import { BINARY, freePort, postJson, startServer } from './harness.mjs';
import { DEPLOY, startNginx, waitFor } from './fleet.mjs';

const execFileP = promisify(execFile);
const KEY = { Authorization: 'Bearer sk-fleet' };
const COMPLETION = { prompt: 'Once upon a time', max_tokens: 4, temperature: 0 };

// A recording upstream. X-Spy: 503 | 429 | 500 | sse (headers, an event at 200 ms, then [DONE] once the client
// says it has that event, or after 5 s: `sseEndedBy` tells which); else a JSON echo.
async function startSpy() {
  const seen = [];
  const spyState = { sseEndedBy: null, eventSeen: () => {} };
  const server = http.createServer((req, res) => {
    let bytes = 0;
    req.on('data', (d) => { bytes += d.length; });
    req.on('end', () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, bytes });
      const mode = req.headers['x-spy'];
      if (['503', '429', '500'].includes(mode)) {
        res.writeHead(Number(mode), { 'Content-Type': 'application/json', 'Retry-After': '1' });
        res.end(JSON.stringify({ error: { message: `spy ${mode}` } }));
      } else if (mode === 'sse') {
        res.writeHead(200, { 'Content-Type': 'text/event-stream' });
        res.flushHeaders();
        spyState.sseEndedBy = null;
        let fallback;
        const end = (by) => {
          if (spyState.sseEndedBy) return;
          spyState.sseEndedBy = by;
          clearTimeout(fallback);
          res.write('data: [DONE]\n\n');
          res.end();
        };
        setTimeout(() => {
          res.write('data: {"n":1}\n\n');
          spyState.eventSeen = () => end('client');
          fallback = setTimeout(() => end('timeout'), 5000);
        }, 200);
      } else {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end('{"spy":true}');
      }
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { addr: `127.0.0.1:${server.address().port}`, seen, state: spyState,
           close: () => new Promise((r) => server.close(r)) };
}

let replicas = [];
let spy;
const cleanup = [];
before(async () => {
  replicas = await Promise.all([0, 1].map(() => startServer(['--api-key', 'sk-fleet', '--no-result-cache'])));
  spy = await startSpy();
});
after(async () => {
  for (const c of cleanup.reverse()) await c();
  await Promise.all(replicas.map((r) => r.stop('SIGKILL')));
  await spy.close();
});

async function nginxFor(upstreams, renderArgs) {
  const n = await startNginx(upstreams, renderArgs);
  cleanup.push(n.stop);
  return n;
}
const addr = (s) => `127.0.0.1:${s.port}`;
const entry = (n, rid) => waitFor(() => n.accessLog().find((e) => e.rid === rid), 5000, `access log entry ${rid}`);

test('render.sh: the body limit defaults to the replicas\' --max-body-bytes; bad input is refused', async () => {
  const help = execFileSync(BINARY, ['serve', '--help'], { encoding: 'utf8' });
  const replicaDefault = help.match(/--max-body-bytes \S+=(\d+)/);
  assert.ok(replicaDefault, 'serve --help shows the --max-body-bytes default');
  const { stdout } = await execFileP(path.join(DEPLOY, 'nginx/render.sh'), ['--replica', '127.0.0.1:1']);
  assert.match(stdout, new RegExp(`client_max_body_size ${replicaDefault[1]};`));
  assert.match(stdout, /least_conn;/);
  assert.match(stdout, /proxy_buffering off;/);
  assert.match(stdout, /proxy_next_upstream error timeout http_503 non_idempotent;/);
  for (const [args, message] of [[[], /at least one --replica/], [['--replica', 'nohost'], /HOST:PORT/],
    [['--replica', 'a:1', '--max-body-bytes', '1m'], /whole number/], [['--replica', 'a:1', '--bogus', 'x'], /unknown option/]]) {
    await assert.rejects(execFileP(path.join(DEPLOY, 'nginx/render.sh'), args), (e) => {
      assert.equal(e.code, 2);
      assert.match(e.stderr, message);
      return true;
    });
  }
});

test('SSE events arrive as sent; X-Request-Id made, passed on, returned, logged; Authorization passed', async () => {
  const n = await nginxFor([spy.addr]);
  const t0 = Date.now();
  const r = await fetch(n.url + '/v1/chat/completions', {
    method: 'POST', headers: { 'X-Spy': 'sse', Authorization: 'Bearer sk-client', 'Content-Type': 'application/json' },
    body: '{}',
  });
  const reader = r.body.getReader();
  const first = new TextDecoder().decode((await reader.read()).value);
  const firstMs = Date.now() - t0;
  assert.match(first, /^data: \{"n":1\}/);
  // The upstream ends the stream only once the event has reached the client (or after 5 s): a proxy that buffered
  // it would deliver it only with the end, which then comes from the timeout. No clock bound to flake under load.
  spy.state.eventSeen();
  while (!(await reader.read()).done) { /* the rest */ }
  assert.equal(spy.state.sseEndedBy, 'client', `the event reached the client at ${firstMs} ms, only with the stream's end: nginx held it back`);

  const rid = r.headers.get('x-request-id');
  assert.match(rid, /^[0-9a-f]{32}$/);
  const got = spy.seen.at(-1);
  assert.equal(got.headers['x-request-id'], rid);
  assert.equal(got.headers.authorization, 'Bearer sk-client');
  assert.equal(got.headers['x-forwarded-for'], '127.0.0.1');
  assert.equal(got.headers.connection, undefined, 'keep-alive to upstreams: no Connection: close');
  assert.equal((await entry(n, rid)).upstreams[0], spy.addr);

  const own = await fetch(n.url + '/anything', { headers: { 'X-Request-Id': 'client-chosen-1' } });
  assert.equal(own.headers.get('x-request-id'), 'client-chosen-1');
  assert.equal(spy.seen.at(-1).headers['x-request-id'], 'client-chosen-1');
  await entry(n, 'client-chosen-1');
  assert.equal((await fetch(n.url + '/metrics')).status, 404, 'the balancer does not show one replica\'s metrics');
});

test('Authorization reaches the replicas: 401 without a key (not retried), 200 with it', async () => {
  const n = await nginxFor(replicas.map(addr));
  const denied = await postJson(n.url + '/v1/completions', COMPLETION, { 'X-Request-Id': 'noauth' });
  assert.equal(denied.status, 401, denied.text);
  assert.equal((await entry(n, 'noauth')).upstreams.length, 1);
  const ok = await postJson(n.url + '/v1/completions', COMPLETION, { ...KEY, 'X-Request-Id': 'auth' });
  assert.equal(ok.status, 200, ok.text);
  assert.ok(ok.json.choices[0].text.length > 0);
});

test('a body over the replicas\' limit is refused by nginx; one at the limit reaches a replica', async () => {
  const n = await nginxFor(replicas.map(addr), ['--max-body-bytes', '4096']);
  const pad = (size) => {
    const base = JSON.stringify({ ...COMPLETION, prompt: '' });
    return base.replace('"prompt":""', `"prompt":"${'a'.repeat(size - base.length)}"`);
  };
  const over = await postJson(n.url + '/v1/completions', pad(4097), { ...KEY, 'X-Request-Id': 'big' });
  assert.equal(over.status, 413);
  assert.deepEqual((await entry(n, 'big')).upstreams, []);
  const at = await postJson(n.url + '/v1/completions', pad(4096), { ...KEY, 'X-Request-Id': 'limit' });
  assert.equal((await entry(n, 'limit')).upstreams.length, 1);
  assert.notEqual(at.status, 413, at.text);
});

test('failover: a 503 or a refused connection sends the POST to the next replica; 429 and 500 do not', async () => {
  const dead = `127.0.0.1:${await freePort()}`;
  const n = await nginxFor([spy.addr, dead, addr(replicas[0])]);
  for (let i = 0; i < 6; ++i) {
    const r = await postJson(n.url + '/v1/completions', COMPLETION, { ...KEY, 'X-Spy': '503', 'X-Request-Id': `f503-${i}` });
    assert.equal(r.status, 200, r.text);
  }
  const retried = [];
  for (let i = 0; i < 6; ++i) retried.push(await entry(n, `f503-${i}`));
  for (const e of retried) assert.equal(e.upstreams.at(-1), addr(replicas[0]));
  assert.ok(retried.some((e) => e.upstreams.includes(spy.addr) && e.upstatus.includes('503')), JSON.stringify(retried));
  assert.ok(retried.some((e) => e.upstreams.includes(dead) && e.upstatus.includes('502')), JSON.stringify(retried));

  // A fresh balancer for each: the 503s above took the spy out for fail_timeout (passive health).
  for (const status of ['429', '500']) {
    const m = await nginxFor([spy.addr, addr(replicas[0])]);
    const seen = [];
    for (let i = 0; i < 6; ++i) {
      const rid = `f${status}-${i}`;
      const r = await postJson(m.url + '/v1/completions', COMPLETION, { ...KEY, 'X-Spy': status, 'X-Request-Id': rid });
      seen.push({ status: r.status, e: await entry(m, rid) });
    }
    const fromSpy = seen.filter((s) => s.e.upstreams.includes(spy.addr));
    assert.ok(fromSpy.length > 0, `no request reached the spy: ${JSON.stringify(seen)}`);
    for (const s of fromSpy) {
      assert.equal(s.status, Number(status));
      assert.equal(s.e.upstreams.at(-1), spy.addr, `a ${status} must not be retried`);
    }
  }
});

test('no replica left: an OpenAI-style 503 with Retry-After', async () => {
  const n = await nginxFor([`127.0.0.1:${await freePort()}`, `127.0.0.1:${await freePort()}`]);
  const r = await postJson(n.url + '/v1/completions', COMPLETION, { 'X-Request-Id': 'none-left' });
  assert.equal(r.status, 503, r.text);
  assert.equal(r.headers.get('retry-after'), '1');
  assert.equal(r.headers.get('x-request-id'), 'none-left');
  assert.equal(r.json.error.code, 'service_unavailable');
  for (const k of ['message', 'type', 'param', 'code']) assert.ok(k in r.json.error);
});

test('session affinity: a session sticks to one replica and moves when it is down; no session: least_conn', async () => {
  const n = await nginxFor(replicas.map(addr));
  const send = async (rid, session) => {
    const headers = { ...KEY, 'X-Request-Id': rid, ...(session ? { 'X-Session-Id': session } : {}) };
    const r = await postJson(n.url + '/v1/completions', COMPLETION, headers);
    assert.equal(r.status, 200, r.text);
    return (await entry(n, rid)).upstreams.at(-1);
  };
  const home = new Set();
  for (let i = 0; i < 8; ++i) home.add(await send(`s1-${i}`, 'conversation-1'));
  assert.equal(home.size, 1, `one session, one replica: ${[...home]}`);
  const spread = new Set();
  for (let i = 0; i < 16; ++i) spread.add(await send(`many-${i}`, `conversation-many-${i}`));
  assert.equal(spread.size, 2, 'sixteen sessions land on both replicas');
  // Sequential requests without a session: least_conn breaks its ties in turn, so both replicas serve.
  const plain = new Set();
  for (let i = 0; i < 4; ++i) plain.add(await send(`plain-${i}`));
  assert.equal(plain.size, 2);

  // The session's replica drains and exits: its session goes on at the other one.
  const [homeAddr] = home;
  const victim = replicas.find((r) => addr(r) === homeAddr);
  victim.proc.kill('SIGTERM');
  assert.equal((await victim.exited).code, 0);
  for (let i = 0; i < 4; ++i) assert.notEqual(await send(`s1-after-${i}`, 'conversation-1'), homeAddr);
});
