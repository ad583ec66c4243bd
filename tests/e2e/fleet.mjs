// A fleet on loopback for the tests of deploy/: nginx with the project's configuration (deploy/nginx, rendered
// by its render.sh into a temporary prefix) and Prometheus with the project's rules (deploy/prometheus), each
// started as an ordinary process and stopped by the test. Replicas come from harness.mjs.
import { spawn, execFile } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import { HERE, SOURCE_DIR, freePort, sleep, tempDir } from './harness.mjs';

const execFileP = promisify(execFile);
export const DEPLOY = path.join(SOURCE_DIR, 'deploy');

// npm packages from the e2e_npm_install fixture (in the build tree).
export function nodePackage(name) {
  const dir = process.env.TESSERA_E2E_NODE_DIR ?? HERE;
  return createRequire(path.join(dir, 'package.json'))(name);
}

// Polls `probe` (async, truthy when done) every `everyMs` until `timeoutMs`; throws with `what` on timeout.
export async function waitFor(probe, timeoutMs, what, everyMs = 100) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const v = await probe();
      if (v) return v;
    } catch { /* not yet */ }
    await sleep(everyMs);
  }
  throw new Error(`timed out waiting for ${what}`);
}

function spawnLogged(cmd, args) {
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  proc.stderr.on('data', (d) => { log += d; });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return { proc, exited, log: () => log };
}

async function stopProcess(p, signal = 'SIGTERM') {
  if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill(signal);
  const timer = setTimeout(() => p.proc.kill('SIGKILL'), 5000);
  await p.exited;
  clearTimeout(timer);
}

// One line of the `tessera` access log format: rid, upstream addresses and statuses (one per try).
function parseAccessLine(line) {
  const m = line.match(/"(\S+) (\S+) [^"]*" (\d+) \d+ rid=(\S+) up="([^"]*)" upstatus="([^"]*)"/);
  if (!m) return null;
  const list = (s) => (s === '-' || s === '' ? [] : s.split(/, | : /));
  return { method: m[1], uri: m[2], status: Number(m[3]), rid: m[4], upstreams: list(m[5]), upstatus: list(m[6]) };
}

// Renders deploy/nginx for `replicas` (["127.0.0.1:PORT", ...]) into a fresh prefix and runs nginx there in
// the foreground. `renderArgs`: more render.sh options.
export async function startNginx(replicas, renderArgs = []) {
  const dir = tempDir();
  chmodSync(dir, 0o755);  // nginx's workers (nobody, when the test runs as root) enter the prefix
  const port = await freePort();
  const args = ['--listen', `127.0.0.1:${port}`, '--access-log', 'access.log', '-o', path.join(dir, 'tessera.conf'),
    ...renderArgs];
  for (const r of replicas) args.push('--replica', r);
  await execFileP(path.join(DEPLOY, 'nginx/render.sh'), args);
  copyFileSync(path.join(DEPLOY, 'nginx/nginx.conf'), path.join(dir, 'nginx.conf'));
  const conf = path.join(dir, 'nginx.conf');
  await execFileP('nginx', ['-t', '-q', '-p', dir, '-c', conf]);
  const p = spawnLogged('nginx', ['-p', dir, '-c', conf, '-g', 'daemon off;']);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => {
    if (p.proc.exitCode !== null) throw new Error(`nginx exited: ${p.log()}`);
    await fetch(url + '/metrics');  // 404 from nginx itself, no replica needed
    return true;
  }, 10000, 'nginx to listen');
  return {
    url, port, dir,
    config: () => readFileSync(path.join(dir, 'tessera.conf'), 'utf8'),
    // Entries are written when a request ends; a stream broken mid-way is logged too.
    accessLog: () => readFileSync(path.join(dir, 'access.log'), 'utf8').split('\n').map(parseAccessLine).filter(Boolean),
    errorLog: () => readFileSync(path.join(dir, 'error.log'), 'utf8'),
    stop: () => stopProcess(p, 'SIGQUIT'),  // graceful: lets the workers finish their requests
  };
}

// Prometheus with deploy/prometheus's configuration and rules, scraping `targets` every second. `forOverrides`
// ({ alertname: '5s' }) shortens an alert's `for:` so that a test can see it fire; everything else is the
// project's file as it is.
export async function startPrometheus(targets, { forOverrides = {} } = {}) {
  const YAML = nodePackage('yaml');
  const dir = tempDir();
  const src = path.join(DEPLOY, 'prometheus');
  const config = YAML.parse(readFileSync(path.join(src, 'prometheus.yml'), 'utf8'));
  config.global.scrape_interval = '1s';
  config.global.evaluation_interval = '1s';
  writeFileSync(path.join(dir, 'prometheus.yml'), YAML.stringify(config));
  copyFileSync(path.join(src, 'rules.yml'), path.join(dir, 'rules.yml'));
  const alerts = YAML.parse(readFileSync(path.join(src, 'alerts.yml'), 'utf8'));
  for (const group of alerts.groups)
    for (const rule of group.rules)
      if (rule.alert in forOverrides) rule.for = forOverrides[rule.alert];
  writeFileSync(path.join(dir, 'alerts.yml'), YAML.stringify(alerts));
  mkdirSync(path.join(dir, 'targets'));
  writeFileSync(path.join(dir, 'targets/replicas.json'), JSON.stringify([{ targets, labels: { fleet: 'test' } }]));
  const port = await freePort();
  const p = spawnLogged('prometheus', [`--config.file=${path.join(dir, 'prometheus.yml')}`,
    `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`]);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => {
    if (p.proc.exitCode !== null) throw new Error(`prometheus exited: ${p.log().slice(-2000)}`);
    return (await fetch(url + '/-/ready')).status === 200;
  }, 30000, 'prometheus to be ready', 200);
  return {
    url,
    log: p.log,
    // The result vector of an instant query; throws on a query error.
    async query(expr) {
      const r = await (await fetch(`${url}/api/v1/query?query=${encodeURIComponent(expr)}`)).json();
      if (r.status !== 'success') throw new Error(`query ${expr}: ${r.error}`);
      return r.data.result;
    },
    async alerts() {
      return (await (await fetch(`${url}/api/v1/alerts`)).json()).data.alerts;
    },
    stop: () => stopProcess(p),
  };
}
