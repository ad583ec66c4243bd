// deploy/k8s, checked offline: kubectl renders both kustomizations, every object passes the Kubernetes (and
// KEDA) schemas of the kubernetes-models packages, and the parts agree with each other and with the real
// server: labels and selectors, ports, probe paths, flags (the container's arguments run `tessera serve`),
// drain timing, the autoscaler's metric in /metrics, the Containerfile's user.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync, mkdirSync, copyFileSync } from 'node:fs';
import path from 'node:path';
import { BINARY, EMBEDDED_GGUF, metrics, startServer, tempDir } from './harness.mjs';
import { DEPLOY, nodePackage } from './fleet.mjs';
import { exportedNames, metricNames } from './promql.mjs';

const YAML = nodePackage('yaml');
const K8S = path.join(DEPLOY, 'k8s');
const SCHEMAS = {
  'v1/Namespace': ['kubernetes-models/v1', 'Namespace'],
  'v1/PersistentVolumeClaim': ['kubernetes-models/v1', 'PersistentVolumeClaim'],
  'v1/Service': ['kubernetes-models/v1', 'Service'],
  'v1/ConfigMap': ['kubernetes-models/v1', 'ConfigMap'],
  'apps/v1/Deployment': ['kubernetes-models/apps/v1', 'Deployment'],
  'policy/v1/PodDisruptionBudget': ['kubernetes-models/policy/v1', 'PodDisruptionBudget'],
  'autoscaling/v2/HorizontalPodAutoscaler': ['kubernetes-models/autoscaling/v2', 'HorizontalPodAutoscaler'],
  'keda.sh/v1alpha1/ScaledObject': ['@kubernetes-models/keda/keda.sh/v1alpha1', 'ScaledObject'],
};

// `kubectl kustomize DIR` as parsed objects. KUBECONFIG points nowhere: rendering needs no cluster.
function kustomize(dir) {
  const r = spawnSync('kubectl', ['kustomize', path.join(K8S, dir)], {
    encoding: 'utf8', env: { ...process.env, KUBECONFIG: '/dev/null' },
  });
  assert.equal(r.error, undefined, 'kubectl missing: scripts/setup.sh installs the Debian package kubernetes-client');
  assert.equal(r.status, 0, r.stderr);
  return YAML.parseAllDocuments(r.stdout).map((d) => d.toJS());
}

const hpaSet = kustomize('hpa');
const kedaSet = kustomize('keda');
const find = (objs, kind, name) => objs.find((o) => o.kind === kind && (!name || o.metadata.name === name));
const deployment = find(hpaSet, 'Deployment');
const pod = deployment.spec.template;
const container = pod.spec.containers.find((c) => c.name === 'tessera');
const args = container.args;
const flag = (name) => {
  const i = args.indexOf(name);
  return i < 0 ? undefined : args[i + 1];
};
const isSubset = (sub, sup) => Object.entries(sub).every(([k, v]) => sup[k] === v);

test('every manifest parses and passes its schema', () => {
  const files = execFileSync('find', [K8S, '-name', '*.yaml'], { encoding: 'utf8' }).trim().split('\n');
  assert.ok(files.length >= 10);
  for (const f of files) {
    for (const doc of YAML.parseAllDocuments(readFileSync(f, 'utf8'))) assert.deepEqual(doc.errors, [], f);
  }
  for (const obj of [...hpaSet, ...kedaSet]) {
    const key = `${obj.apiVersion}/${obj.kind}`;
    assert.ok(SCHEMAS[key], `no schema for ${key}`);
    const [pkg, cls] = SCHEMAS[key];
    const Model = nodePackage(pkg)[cls];
    assert.doesNotThrow(() => new Model(obj).validate(), `${key} ${obj.metadata.name}`);
  }
  // The schemas do catch a wrong type.
  const Broken = nodePackage('kubernetes-models/apps/v1').Deployment;
  const copy = structuredClone(deployment);
  copy.spec.template.spec.containers[0].ports[0].containerPort = 'http';
  assert.throws(() => new Broken(copy).validate());
  // The two variants differ only in the autoscaler.
  const kinds = (objs) => objs.map((o) => o.kind).sort();
  assert.deepEqual(kinds(hpaSet).filter((k) => !['HorizontalPodAutoscaler', 'ConfigMap'].includes(k)),
    kinds(kedaSet).filter((k) => k !== 'ScaledObject'));
});

test('labels, selectors, names, namespaces and ports agree', () => {
  assert.ok(isSubset(deployment.spec.selector.matchLabels, pod.metadata.labels));
  const service = find(hpaSet, 'Service');
  const pdb = find(hpaSet, 'PodDisruptionBudget');
  assert.ok(isSubset(service.spec.selector, pod.metadata.labels), 'the Service selects the pods');
  assert.ok(isSubset(pdb.spec.selector.matchLabels, pod.metadata.labels), 'the PDB selects the pods');
  assert.ok(pdb.spec.maxUnavailable === 1 || pdb.spec.minAvailable >= 1);
  const port = container.ports.find((p) => p.name === service.spec.ports[0].targetPort);
  assert.ok(port, 'the Service targets the container\'s named port');
  assert.equal(String(port.containerPort), flag('--port'));
  for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe'])
    assert.equal(container[probe].httpGet.port, port.name, probe);
  for (const obj of [...hpaSet, ...kedaSet].filter((o) => o.kind !== 'Namespace' && o.kind !== 'ConfigMap'))
    assert.equal(obj.metadata.namespace, 'tessera', `${obj.kind} ${obj.metadata.name}`);
  for (const scaler of [find(hpaSet, 'HorizontalPodAutoscaler'), find(kedaSet, 'ScaledObject')]) {
    assert.equal(scaler.spec.scaleTargetRef.name, deployment.metadata.name);
    assert.equal(scaler.spec.scaleTargetRef.kind ?? 'Deployment', 'Deployment');
  }
});

test('probes, drain timing, resources, security and the model volume', () => {
  assert.equal(container.startupProbe.httpGet.path, '/ready');
  assert.equal(container.readinessProbe.httpGet.path, '/ready');
  assert.equal(container.livenessProbe.httpGet.path, '/health');
  assert.ok(container.startupProbe.periodSeconds * container.startupProbe.failureThreshold >= 300,
    'warm-up may take minutes');
  // SIGTERM comes after preStop; the grace period must cover preStop plus the whole drain.
  const preStop = container.lifecycle.preStop.exec.command;
  assert.equal(preStop[0], 'sleep');
  const drain = Number(flag('--drain-timeout'));
  assert.ok(drain > 0);
  assert.ok(pod.spec.terminationGracePeriodSeconds > Number(preStop[1]) + drain,
    `terminationGracePeriodSeconds ${pod.spec.terminationGracePeriodSeconds} <= preStop ${preStop[1]} + drain ${drain}`);
  // The KV pool is sized from the memory limit: no flag may size it apart from the limit, and the request is
  // the limit (the pool is counted whole).
  for (const f of ['--kv-cache-mem', '--kv-blocks', '-c', '--ctx-size', '--ignore-memory-check'])
    assert.equal(args.includes(f), false, f);
  assert.equal(container.resources.requests.memory, container.resources.limits.memory);
  assert.equal(container.resources.requests.cpu, container.resources.limits.cpu);
  const threads = container.env.find((e) => `$(${e.name})` === flag('--threads'));
  assert.equal(threads.valueFrom.resourceFieldRef.resource, 'limits.cpu');
  assert.equal(pod.spec.securityContext.runAsNonRoot, true);
  assert.ok(pod.spec.securityContext.runAsUser > 0);
  assert.equal(container.securityContext.readOnlyRootFilesystem, true);
  assert.equal(container.securityContext.allowPrivilegeEscalation, false);
  const model = flag('--model');
  const mount = container.volumeMounts.find((m) => model.startsWith(m.mountPath + '/'));
  assert.ok(mount?.readOnly, 'the model comes from a read-only volume mount');
  const volume = pod.spec.volumes.find((v) => v.name === mount.name);
  assert.ok(volume.persistentVolumeClaim, 'the model volume is a claim');
  assert.ok(find(hpaSet, 'PersistentVolumeClaim', volume.persistentVolumeClaim.claimName));
  assert.equal(deployment.spec.strategy.rollingUpdate.maxUnavailable, 0);
});

test('the autoscalers: queue metric, target 50, 2 to 20 replicas, five minutes before scaling in', () => {
  const hpa = find(hpaSet, 'HorizontalPodAutoscaler');
  assert.equal(hpa.apiVersion, 'autoscaling/v2');
  assert.deepEqual([hpa.spec.minReplicas, hpa.spec.maxReplicas], [2, 20]);
  const [metric] = hpa.spec.metrics;
  assert.equal(metric.type, 'Pods');
  assert.equal(metric.pods.metric.name, 'tessera_num_requests_waiting');
  assert.deepEqual(metric.pods.target, { type: 'AverageValue', averageValue: '50' });
  assert.equal(hpa.spec.behavior.scaleDown.stabilizationWindowSeconds, 300);

  const so = find(kedaSet, 'ScaledObject');
  assert.deepEqual([so.spec.minReplicaCount, so.spec.maxReplicaCount], [2, 20]);
  assert.equal(so.spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindowSeconds, 300);
  const [trigger] = so.spec.triggers;
  assert.equal(trigger.type, 'prometheus');
  assert.equal(trigger.metadata.threshold, '50');
  assert.deepEqual([...metricNames(trigger.metadata.query)], ['tessera_num_requests_waiting']);

  const adapter = YAML.parse(find(hpaSet, 'ConfigMap', 'prometheus-adapter-tessera').data['config.yaml']);
  const [rule] = adapter.rules;
  assert.deepEqual([...metricNames(rule.seriesQuery)], ['tessera_num_requests_waiting']);
  assert.equal(rule.name.as, metric.pods.metric.name, 'the adapter serves the name the HPA asks for');
  assert.ok(new RegExp(rule.name.matches).test('tessera_num_requests_waiting'));
  assert.deepEqual(Object.keys(rule.resources.overrides).sort(), ['namespace', 'pod']);
});

test('Prometheus on Kubernetes: the scrape configuration passes promtool with discovery stubbed', () => {
  // Debian's Prometheus is built without Kubernetes discovery, so its promtool rejects kubernetes_sd_configs;
  // everything else (relabelling, rule files) is checked with a static target in its place.
  const dir = tempDir();
  const config = YAML.parse(readFileSync(path.join(DEPLOY, 'prometheus/kubernetes.yml'), 'utf8'));
  const job = config.scrape_configs.find((j) => j.job_name === 'tessera');
  assert.deepEqual(job.kubernetes_sd_configs, [{ role: 'pod' }]);
  const relabelled = job.relabel_configs.map((r) => r.target_label).filter(Boolean);
  assert.deepEqual(relabelled.sort(), ['namespace', 'pod'], 'the adapter rule needs namespace and pod labels');
  delete job.kubernetes_sd_configs;
  job.static_configs = [{ targets: ['127.0.0.1:8080'] }];
  writeFileSync(path.join(dir, 'prometheus.yml'), YAML.stringify(config));
  for (const f of ['rules.yml', 'alerts.yml']) copyFileSync(path.join(DEPLOY, 'prometheus', f), path.join(dir, f));
  const r = spawnSync('promtool', ['check', 'config', path.join(dir, 'prometheus.yml')], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

test('the Containerfile runs as the Deployment\'s user and exposes its port', () => {
  const file = readFileSync(path.join(DEPLOY, 'container/Containerfile'), 'utf8');
  assert.match(file, /^FROM \$\{DEBIAN_IMAGE\}/m);
  assert.match(file, /^ARG DEBIAN_IMAGE=debian:/m);
  assert.match(file, /scripts\/setup\.sh --build-only/);
  assert.equal(file.match(/^USER (\d+)/m)[1], String(pod.spec.securityContext.runAsUser));
  assert.equal(file.match(/^EXPOSE (\d+)/m)[1], flag('--port'));
  assert.deepEqual(JSON.parse(file.match(/^ENTRYPOINT (.*)$/m)[1]), ['/usr/local/bin/tessera']);
  assert.equal(args[0], 'serve');
});

// The container's arguments with the pod's environment filled in and the model volume replaced by a folder
// with the embedded model, less --host, --port and --threads, which startServer gives (loopback, 1 thread).
function containerArgsHere() {
  const env = Object.fromEntries(container.env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value]));
  const modelDir = path.join(tempDir(), 'models');
  mkdirSync(modelDir);
  copyFileSync(EMBEDDED_GGUF, path.join(modelDir, env.TESSERA_MODEL_FILE));
  const mount = container.volumeMounts.find((m) => flag('--model').startsWith(m.mountPath + '/')).mountPath;
  const out = [];
  for (let i = 1; i < args.length; ++i) {
    if (['--host', '--port', '--threads'].includes(args[i])) {
      ++i;
      continue;
    }
    out.push(args[i].replace(/\$\(([A-Z_]+)\)/g, (_, v) => {
      assert.ok(v in env, `$(${v}) is not in the container's env`);
      return env[v];
    }).replace(mount, modelDir));
  }
  return out;
}

test('the container\'s flags are serve\'s, and its probes and the HPA\'s metric answer on the real server', async () => {
  const help = execFileSync(BINARY, ['serve', '--help'], { encoding: 'utf8' });
  for (const a of args.slice(1).filter((x) => x.startsWith('-')))
    assert.match(help, new RegExp(`(^|[\\s,])${a}[\\s,]`), `${a} is not in serve --help`);
  const s = await startServer(['--host', '127.0.0.1', ...containerArgsHere()]);
  try {
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe'])
      assert.equal((await fetch(s.url + container[probe].httpGet.path)).status, 200, probe);
    const names = exportedNames(await metrics(s.url));
    assert.ok(names.has(find(hpaSet, 'HorizontalPodAutoscaler').spec.metrics[0].pods.metric.name));
    const models = await (await fetch(s.url + '/v1/models')).json();
    assert.equal(models.data[0].id, container.env.find((e) => e.name === 'TESSERA_MODEL_NAME').value);
  } finally {
    const { code } = await s.stop();
    assert.equal(code, 0);
  }
});
