// Shared helpers of the end-to-end tests: start the real `tessera serve` binary on loopback with a free
// port, wait for /ready, talk to it with fetch, curl and the official `openai` package, stop it.
import { spawn, execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';

export const HERE = path.dirname(fileURLToPath(import.meta.url));

export const BINARY = process.env.TESSERA_BINARY ?? path.resolve(HERE, '../../build/tessera');
export const SOURCE_DIR = process.env.TESSERA_SOURCE_DIR ?? path.resolve(HERE, '../..');
export const EMBEDDED_GGUF = path.join(SOURCE_DIR, 'models/stories260K.gguf');
const execFileP = promisify(execFile);

// The `openai` package from the npm install done by the e2e_npm_install fixture (in the build tree).
export function openaiPackage() {
  const dir = process.env.TESSERA_E2E_NODE_DIR ?? HERE;
  return createRequire(path.join(dir, 'package.json'))('openai');
}

// A fresh directory under the system's temporary folder, removed when this test process exits (a converted
// model in one is hundreds of MB: left behind, every run of the suite would leave them all).
const tempDirs = [];
process.on('exit', () => {
  for (const dir of tempDirs) {
    // A directory that cannot be removed (a peer's file still open) is left behind, not a failed test.
    try { rmSync(dir, { recursive: true, force: true, maxRetries: 3 }); } catch { /* left in /tmp */ }
  }
});
export function tempDir() {
  const dir = mkdtempSync(path.join(tmpdir(), 'tessera-e2e-'));
  tempDirs.push(dir);
  return dir;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A loopback port that was free a moment ago (for peers that need their port before they start).
export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
  });
}

// Starts `tessera serve ARGS --port PORT` (0: any free port), reads the bound port from stderr, waits until
// /ready answers 200 (or, with waitReady false, until /health does). `env`: extra environment variables;
// `launcher`: a command the binary is run through (e.g. a shell that lowers a limit first), given the binary and its
// arguments.
export async function startServer(args = [],
  { waitReady = true, timeoutMs = 60000, port: wanted = 0, env = {}, launcher = [] } = {}) {
  const argv = [BINARY, 'serve', '--port', String(wanted), '--threads', '1', ...args];
  const command = launcher.length ? [...launcher, ...argv] : argv;
  const proc = spawn(command[0], command.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d.toString(); });
  proc.stdout.on('data', () => {});
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const deadline = Date.now() + timeoutMs;
  let port = 0;
  while (!port) {
    const m = stderr.match(/on http:\/\/[^:]+:(\d+)/);
    if (m) port = Number(m[1]);
    else if (proc.exitCode !== null) throw new Error(`server exited early: ${stderr}`);
    else if (Date.now() > deadline) throw new Error(`server did not start: ${stderr}`);
    else await sleep(20);
  }
  const url = `http://127.0.0.1:${port}`;
  const server = {
    proc, port, url, exited,
    get stderr() { return stderr; },
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
  const probe = waitReady ? '/ready' : '/health';
  while (true) {
    try {
      const r = await fetch(url + probe);
      if (r.status === 200) break;
    } catch { /* not up yet */ }
    if (proc.exitCode !== null) throw new Error(`server exited: ${stderr}`);
    if (Date.now() > deadline) { await server.stop('SIGKILL'); throw new Error(`server not ready: ${stderr}`); }
    await sleep(50);
  }
  return server;
}

// Runs fn(server) against a fresh server, which is killed afterwards whatever happened.
export async function withServer(args, fn, opts) {
  const server = await startServer(args, opts);
  try {
    return await fn(server);
  } finally {
    await server.stop('SIGKILL');
  }
}

export async function postJson(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, headers: r.headers, text, json };
}

// curl with the body from a file (so that any bytes go through); returns status, headers and body.
export async function curl(url, { method = 'POST', bodyFile, headers = {} } = {}) {
  const args = ['-sS', '-X', method, '-D', '-', '-o', '-', '--max-time', '60'];
  for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}: ${v}`);
  if (bodyFile) args.push('--data-binary', `@${bodyFile}`);
  args.push(url);
  const { stdout } = await execFileP('curl', args, { encoding: 'latin1', maxBuffer: 64 << 20 });
  const split = stdout.indexOf('\r\n\r\n');
  const head = stdout.slice(0, split);
  const body = Buffer.from(stdout.slice(split + 4), 'latin1').toString('utf8');
  const status = Number(head.split(' ')[1]);
  let json = null;
  try { json = JSON.parse(body); } catch { /* not JSON */ }
  return { status, head, body, json };
}

// Reads an SSE response body; returns the parsed data payloads ('[DONE]' kept as a string).
export async function readSse(response) {
  const text = await response.text();
  return text.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => {
    const data = e.slice(6);
    return data === '[DONE]' ? data : JSON.parse(data);
  });
}

export async function metrics(url, headers = {}) {
  const r = await fetch(url + '/metrics', { headers });
  return r.text();
}

// The value of one sample in a Prometheus text exposition (sum over samples whose line starts with `prefix`).
export function metricValue(text, prefix) {
  let sum = 0, found = false;
  for (const line of text.split('\n')) {
    if (line.startsWith(prefix)) {
      const v = Number(line.slice(line.lastIndexOf(' ') + 1));
      if (!Number.isNaN(v)) { sum += v; found = true; }
    }
  }
  return found ? sum : null;
}

// A Tessera metric under the default prefix; null when absent.
export function tesseraMetric(text, name) {
  return metricValue(text, 'tessera_' + name);
}

// CPU seconds (user + system) a process has used so far.
export function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;  // utime, stime in clock ticks (USER_HZ = 100)
}

// Greedy text from the engine directly (`tessera run`), without the prompt echo.
export async function directRun(prompt, nTokens, model = null) {
  const args = ['run', '-p', prompt, '--temp', '0', '-n', String(nTokens), '-t', '1'];
  if (model) args.push('-m', model);
  const { stdout } = await execFileP(BINARY, args, { maxBuffer: 16 << 20 });
  if (!stdout.startsWith(prompt) || !stdout.endsWith('\n')) throw new Error(`unexpected run output: ${stdout}`);
  return stdout.slice(prompt.length, -1);
}

export function rssKb(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const get = (k) => Number(status.match(new RegExp(`${k}:\\s+(\\d+)`))[1]);
  return { rss: get('VmRSS'), hwm: get('VmHWM') };
}

export function expectOpenAiError(assert, res, status) {
  assert.equal(res.status, status, `status of ${res.text ?? res.body}`);
  const e = res.json?.error;
  assert.ok(e, `OpenAI error body expected, got ${res.text ?? res.body}`);
  for (const k of ['message', 'type', 'param', 'code']) assert.ok(k in e, `error.${k} missing`);
  assert.equal(typeof e.message, 'string');
}
