// Reading PromQL in deploy/: the metric names an expression uses, the queries of a Grafana dashboard, and the
// names a /metrics exposition exports.

const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless',
  'bool', 'offset', 'inf', 'nan']);

// Metric names in `expr`: identifiers outside label matchers, grouping clauses, ranges and strings that are
// not function calls, keywords or numbers.
export function metricNames(expr) {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set();
  for (const m of bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const rest = bare.slice(m.index + m[0].length);
    if (/^\s*\(/.test(rest) || KEYWORDS.has(m[0].toLowerCase())) continue;
    if (/^[eE]\d/.test(m[0]) && /\d$/.test(bare.slice(0, m.index))) continue;  // the exponent of 1e3
    names.add(m[0]);
  }
  return names;
}

// Every query of a dashboard (rows' nested panels included), with its panel's title.
export function dashboardQueries(dashboard) {
  const out = [];
  const walk = (panels) => {
    for (const p of panels ?? []) {
      for (const t of p.targets ?? []) out.push({ panel: p.title, refId: t.refId, expr: t.expr });
      walk(p.panels);
    }
  };
  walk(dashboard.panels);
  return out;
}

// A dashboard query as Prometheus can run it: Grafana's variables replaced by a window and match-all.
export function instantiate(expr, rateInterval = '1m') {
  return expr.replaceAll('$__rate_interval', rateInterval).replace(/\$\{?[a-zA-Z_]+\}?/g, '.*');
}

// The sample and family names of a Prometheus text exposition.
export function exportedNames(text) {
  const names = new Set();
  for (const line of text.split('\n')) {
    const type = line.match(/^# TYPE (\S+) /);
    if (type) names.add(type[1]);
    else if (line && !line.startsWith('#')) names.add(line.match(/^[^{ ]+/)[0]);
  }
  return names;
}

// Recording rules of a rules file (parsed YAML): record name -> expression.
export function recordingRules(rulesFile) {
  const out = new Map();
  for (const g of rulesFile.groups) for (const r of g.rules) if (r.record) out.set(r.record, r.expr);
  return out;
}

// The raw metric names behind `names`, recording rules expanded through their expressions.
export function expandRecorded(names, rules) {
  const raw = new Set();
  const visit = (n, depth) => {
    if (depth > 10) throw new Error(`recording rules loop at ${n}`);
    if (rules.has(n)) for (const m of metricNames(rules.get(n))) visit(m, depth + 1);
    else raw.add(n);
  };
  for (const n of names) visit(n, 0);
  return raw;
}
