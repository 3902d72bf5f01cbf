/**
 * deploy/grafana/switchyard.json names only metrics the gateway exports: every PromQL expression of
 * its panels and variables is taken apart into metric names (functions, label matchers, ranges,
 * `by (...)` lists and Grafana's `$variables` left out), and each name must be a series in a live
 * gateway's /metrics after traffic that exercises them all (a `_bucket`/`_sum`/`_count` name must
 * belong to a histogram the gateway declares). With `promtool` (Debian's prometheus package) every
 * expression is also checked by Prometheus's own parser; skipped only when it is absent and CI is
 * not set.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';

const DASHBOARD = join(import.meta.dirname, '..', 'deploy', 'grafana', 'switchyard.json');
const ADMIN = 'admin-key-grafana-0123456789ab';
const FREE = 'sk-gw-grafana-free-0001';
const LIMITED = 'sk-gw-grafana-limited-0002';
const hasPromtool = spawnSync('promtool', ['--version']).status === 0;
const skipPromtool = !hasPromtool && !process.env.CI ? 'promtool is not installed (apt-get install prometheus; .ci/run does it)' : false;

/** PromQL's functions and aggregation operators the dashboard may call. */
const FUNCTIONS = new Set([
  'sum', 'min', 'max', 'avg', 'count', 'stddev', 'stdvar', 'topk', 'bottomk', 'quantile', 'count_values', 'group',
  'rate', 'irate', 'increase', 'delta', 'idelta', 'deriv', 'resets', 'changes',
  'avg_over_time', 'min_over_time', 'max_over_time', 'sum_over_time', 'count_over_time', 'last_over_time', 'quantile_over_time',
  'histogram_quantile', 'histogram_count', 'histogram_sum', 'histogram_fraction',
  'abs', 'ceil', 'floor', 'round', 'clamp', 'clamp_min', 'clamp_max', 'sqrt', 'exp', 'ln', 'log2', 'log10',
  'sort', 'sort_desc', 'label_replace', 'label_join', 'vector', 'scalar', 'time', 'timestamp', 'absent', 'absent_over_time',
]);
const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset', 'atan2', 'inf', 'nan']);

/**
 * The metric names a PromQL expression selects. Throws on a call of something that is no PromQL
 * function (a typo there would otherwise only show as an empty panel).
 */
function metricNames(expr: string): string[] {
  const s = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\$\{?\w+\}?/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names: string[] = [];
  for (const m of s.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const word = m[0];
    const at = m.index;
    if (at > 0 && /[0-9.]/.test(s[at - 1] as string)) continue; // 1e3, 5m
    if (KEYWORDS.has(word.toLowerCase())) continue;
    if (/^\s*\(/.test(s.slice(at + word.length))) {
      if (!FUNCTIONS.has(word)) throw new Error(`${word}() is not a PromQL function (in ${expr})`);
      continue;
    }
    names.push(word);
  }
  return names;
}

interface Target {
  expr?: string;
}
interface Panel {
  title?: string;
  type: string;
  targets?: Target[];
  panels?: Panel[];
}
interface Dashboard {
  title: string;
  uid: string;
  panels: Panel[];
  templating: { list: Array<{ name: string; type: string; query?: string | { query: string } }> };
}

/** Every PromQL expression of the dashboard, with where it is: panel targets and query variables (`label_values(metric, label)`). */
function expressions(d: Dashboard): Array<{ where: string; expr: string }> {
  const out: Array<{ where: string; expr: string }> = [];
  const walk = (panels: Panel[]): void => {
    for (const p of panels) {
      for (const t of p.targets ?? []) if (t.expr !== undefined) out.push({ where: `panel "${p.title}"`, expr: t.expr });
      if (p.panels) walk(p.panels);
    }
  };
  walk(d.panels);
  for (const v of d.templating.list) {
    if (v.type !== 'query' || v.query === undefined) continue;
    const q = typeof v.query === 'string' ? v.query : v.query.query;
    const lv = /^label_values\((.+),\s*\w+\)$/.exec(q.trim());
    out.push({ where: `variable $${v.name}`, expr: lv ? (lv[1] as string) : q });
  }
  return out;
}

/** Sample names in an exposition text, and the families its `# TYPE` lines declare. */
function exposition(text: string): { samples: Set<string>; types: Map<string, string> } {
  const samples = new Set<string>();
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    const t = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (t) types.set(t[1] as string, t[2] as string);
    else if (line !== '' && !line.startsWith('#')) samples.add(/^[^{ ]+/.exec(line)?.[0] as string);
  }
  return { samples, types };
}

/** Names of `names` the exposition lacks (a histogram's series must belong to a declared histogram). */
function missing(names: Iterable<string>, exp: ReturnType<typeof exposition>): string[] {
  const out: string[] = [];
  for (const n of names) {
    const family = /^(.+)_(?:bucket|sum|count)$/.exec(n)?.[1];
    const counter = /^(.+)_total$/.exec(n)?.[1];
    const declared = exp.types.has(n) || (family !== undefined && exp.types.get(family) === 'histogram') || (counter !== undefined && exp.types.get(counter) === 'counter');
    if (!exp.samples.has(n) || !declared) out.push(n);
  }
  return out;
}

const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;

describe('PromQL metric-name extraction', () => {
  it('finds the selected metrics, not functions, labels, ranges or variables', () => {
    assert.deepEqual(
      metricNames('histogram_quantile(0.95, sum by (le, model) (rate(switchyard_request_duration_seconds_bucket{model=~"$model", route!="x"}[$__rate_interval])))'),
      ['switchyard_request_duration_seconds_bucket'],
    );
    assert.deepEqual(
      metricNames('sum(rate(a_total{cache="hit"}[5m] offset 1h)) / on (x) group_left (y) sum without (z) (increase(b_count[$__range])) * 3600 > bool 1e3'),
      ['a_total', 'b_count'],
    );
    assert.throws(() => metricNames('sum(rat(a_total[5m]))'), /rat\(\) is not a PromQL function/);
  });

  it('reports a dashboard name the gateway does not export', () => {
    const exp = exposition('# TYPE h histogram\nh_bucket{le="1"} 1\nh_count 1\n# TYPE c counter\nc_total 2\n');
    assert.deepEqual(missing(['h_bucket', 'h_count', 'c_total'], exp), []);
    assert.deepEqual(missing(['h_sum', 'c_totall', 'c_total_count'], exp), ['h_sum', 'c_totall', 'c_total_count']);
  });
});

describe('Grafana dashboard deploy/grafana/switchyard.json', () => {
  let up: FakeUpstream;
  let gw: TestGateway;

  before(async () => {
    up = await startFakeOpenAI();
    gw = await startGateway(`
routing: { retry: { max_retries: 1, base_delay_ms: 1, max_delay_ms: 5 }, breaker: { consecutive_failures: 0, min_requests: 1000000 } }
admin: { key: "${ADMIN}" }
cache: { enabled: true, cache_nonzero_temperature: true }
backends:
  up: { type: openai, base_url: "${up.url}", api_key: "sk-upstream-000000" }
  dead: { type: openai, base_url: "http://127.0.0.1:1/v1", api_key: "sk-dead-000000000" }
  demo: { type: fake }
models:
  priced: { targets: [ { backend: up, model: up-model, price: { input: 2, output: 8 } } ] }
  unpriced: { targets: [ { backend: up, model: up-model } ] }
  flaky: { targets: [ { backend: dead, model: x }, { backend: up, model: up-model, price: { input: 1, output: 1 } } ] }
  cached: { targets: [ { backend: demo, model: echo, price: { input: 1, output: 1 } } ] }
keys:
  - { name: free, key: "${FREE}" }
  - { name: limited, key: "${LIMITED}", limits: { rpm: 1 } }
`);
  });
  after(async () => {
    await gw?.close();
    await up?.close();
  });

  it('is a Grafana dashboard with a Prometheus datasource variable and PromQL in every panel', () => {
    assert.equal(dashboard.uid, 'switchyard-gateway');
    assert.ok(dashboard.templating.list.some((v) => v.type === 'datasource' && v.query === 'prometheus'));
    const panels = dashboard.panels.filter((p) => p.type !== 'row');
    assert.ok(panels.length >= 10);
    for (const p of panels) assert.ok((p.targets ?? []).length > 0 && p.targets?.every((t) => typeof t.expr === 'string' && t.expr !== ''), `panel "${p.title}" has PromQL`);
    const titles = panels.map((p) => p.title ?? '').join('\n');
    for (const want of [/Requests/, /Errors .*code/, /latency/i, /first token/i, /Tokens/, /Cost .*key and model/, /Cache hit ratio/, /breakers/i, /Rate-limit refusals/]) assert.match(titles, want);
  });

  it('names only metrics that a live gateway exports in /metrics after traffic', async () => {
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: FREE, maxRetries: 0 });
    const ask = (model: string, extra: Partial<OpenAI.ChatCompletionCreateParamsNonStreaming> = {}) =>
      client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hello' }], ...extra });
    up.enqueue({ kind: 'reply', content: 'hi', usage: { prompt_tokens: 100, completion_tokens: 10 } });
    await ask('priced');
    await ask('unpriced');
    // a retry of the same target, then a failover off a dead one
    up.enqueue({ kind: 'error', status: 500, message: 'transient', type: 'server_error' });
    await ask('priced');
    await ask('flaky');
    // a stream (time to first token), a cache miss then hit, an unknown model (4xx)
    const stream = await client.chat.completions.create({ model: 'priced', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 's' }] });
    for await (const _ of stream) void _;
    await ask('cached', { temperature: 0 });
    const hit = await ask('cached', { temperature: 0 }).withResponse();
    assert.equal(hit.response.headers.get('x-switchyard-cache'), 'hit');
    await assert.rejects(ask('no-such-model'), (e: unknown) => e instanceof OpenAI.APIError && e.status === 404);
    // a key over its limit: refused with 429
    const limited = new OpenAI({ baseURL: gw.baseURL, apiKey: LIMITED, maxRetries: 0 });
    await limited.chat.completions.create({ model: 'unpriced', messages: [{ role: 'user', content: 'x' }] });
    await assert.rejects(limited.chat.completions.create({ model: 'unpriced', messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => e instanceof OpenAI.APIError && e.status === 429);

    const res = await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } });
    assert.equal(res.status, 200);
    const exp = exposition(await res.text());
    const named = new Set<string>();
    for (const { where, expr } of expressions(dashboard)) {
      const names = metricNames(expr);
      assert.ok(names.length > 0, `${where}: no metric in ${expr}`);
      for (const n of names) named.add(n);
    }
    assert.deepEqual(missing(named, exp), [], 'dashboard metrics absent from /metrics');
    // the panels the issue asks for are fed by these
    for (const n of ['switchyard_requests_total', 'switchyard_time_to_first_token_seconds_bucket', 'switchyard_cost_usd_total', 'switchyard_circuit_breaker_state', 'switchyard_rate_limited_total', 'gen_ai_client_token_usage_bucket']) assert.ok(named.has(n), n);
  });

  it('parses with Prometheus’s own parser (promtool check rules)', { skip: skipPromtool }, () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-grafana-'));
    try {
      // Grafana's variables as Prometheus would receive them once Grafana substituted them
      const subst = (e: string): string => e.replaceAll('$__rate_interval', '1m').replaceAll('$__range', '6h').replaceAll('$model', '.*');
      const rules = expressions(dashboard).map(({ expr }, i) => `      - record: dashboard:expr_${i}\n        expr: ${JSON.stringify(subst(expr))}`);
      const file = join(dir, 'rules.yml');
      writeFileSync(file, `groups:\n  - name: dashboard\n    rules:\n${rules.join('\n')}\n`);
      const r = spawnSync('promtool', ['check', 'rules', file], { encoding: 'utf8' });
      assert.equal(r.status, 0, `promtool: ${r.stdout}${r.stderr}`);
      assert.match(r.stdout, new RegExp(`SUCCESS: ${rules.length} rules found`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
