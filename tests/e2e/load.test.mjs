// Load: 1000 concurrent streaming connections on loopback (the project's `tessera loadgen`), none lost, hung or
// truncated, within a time bound; the server's memory stays bounded across two rounds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startServer, BINARY, rssKb, sleep } from './harness.mjs';

const execFileP = promisify(execFile);

async function loadgen(port, connections) {
  const args = ['loadgen', '--port', String(port), '-c', String(connections), '-n', '8', '--timeout', '120'];
  try {
    const { stdout } = await execFileP(BINARY, args, { maxBuffer: 1 << 20 });
    return JSON.parse(stdout);
  } catch (e) {
    assert.fail(`loadgen failed: ${e.stdout} ${e.stderr}`);
  }
}

test('1000 concurrent streams: all end with [DONE], bounded time and memory', { timeout: 240000 }, async () => {
  const s = await startServer(['--max-seqs', '64', '--max-queue', '4096', '--no-result-cache']);
  try {
    const t0 = Date.now();
    const first = await loadgen(s.port, 1000);
    const seconds = (Date.now() - t0) / 1000;
    assert.equal(first.lost + first.hung + first.truncated, 0, JSON.stringify(first));
    assert.equal(first.done, 1000, JSON.stringify(first));
    assert.ok(seconds < 120, `took ${seconds} s`);
    await sleep(200);
    const after1 = rssKb(s.proc.pid);
    const second = await loadgen(s.port, 1000);
    assert.equal(second.done, 1000, JSON.stringify(second));
    await sleep(200);
    const after2 = rssKb(s.proc.pid);
    console.log(JSON.stringify({ first, second, rss_kb: [after1, after2] }));
    assert.ok(after2.hwm < 1024 * 1024, `peak RSS ${after2.hwm} kB`);
    assert.ok(after2.rss < after1.rss * 1.25 + 32 * 1024, `RSS grew from ${after1.rss} to ${after2.rss} kB`);
    assert.equal((await fetch(s.url + '/health')).status, 200);
  } finally {
    await s.stop('SIGKILL');
  }
});
