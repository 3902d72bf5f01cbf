/**
 * Metrics as operators consume them:
 *   - the OpenTelemetry GenAI client histograms (`gen_ai_client_token_usage`,
 *     `gen_ai_client_operation_duration_seconds`) beside the `switchyard_*` metrics, with the
 *     conventions' buckets and bounded `gen_ai_*` labels;
 *   - a real Prometheus server (Debian's `prometheus`), started here on a free loopback port with a
 *     generated config, scraping the gateway with the admin key; its HTTP API must report the
 *     number of requests sent.
 * The Prometheus part is skipped only when the binary is absent and CI is not set; in CI it must run.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';
import { freePort } from './support/net.ts';

const ADMIN = 'admin-key-prometheus-0123456789';
const hasPrometheus = spawnSync('prometheus', ['--version']).status === 0;
const skip = !hasPrometheus && !process.env.CI ? 'prometheus is not installed (apt-get install prometheus; .ci/run does it)' : false;

const CONFIG = (upstream: string): string => `
routing: { retry: { max_retries: 0 }, breaker: { consecutive_failures: 0, min_requests: 1000000 } }
admin: { key: "${ADMIN}" }
backends:
  up: { type: openai, base_url: "${upstream}", api_key: "sk-upstream-000000" }
  demo: { type: fake }
models:
  chatty: { targets: [ { backend: up, model: up-model } ] }
  "fam-*": { targets: [ { backend: up, model: "up-\${1}" } ] }
  vectors: { targets: [ { backend: demo, model: echo } ] }
`;

/** Value of the one sample line `name{labels} value` whose labels are exactly `labels`. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  const want = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort()
    .join(',');
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = (m[2] as string).split(/,(?=[a-zA-Z_]+=")/).sort().join(',');
    if (got === want) return Number(m[3]);
  }
  return undefined;
}

describe('GenAI client metrics (OpenTelemetry semantic conventions) on /metrics', () => {
  let up: FakeUpstream;
  let gw: TestGateway;
  let client: OpenAI;

  before(async () => {
    up = await startFakeOpenAI();
    gw = await startGateway(CONFIG(up.url));
    client = new OpenAI({ baseURL: gw.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await gw.close();
    await up.close();
  });

  it('records tokens and duration per operation, provider and configured model, with the conventions’ buckets', async () => {
    up.enqueue({ kind: 'reply', content: 'hi', usage: { prompt_tokens: 1000, completion_tokens: 20 } });
    await client.chat.completions.create({ model: 'chatty', messages: [{ role: 'user', content: 'x' }] });
    // a name a pattern serves: counted under the pattern, never the free-form name
    up.enqueue({ kind: 'reply', content: 'hi', usage: { prompt_tokens: 3, completion_tokens: 5 } });
    await client.chat.completions.create({ model: 'fam-xyz-123', messages: [{ role: 'user', content: 'x' }] });
    await client.embeddings.create({ model: 'vectors', input: 'some words' });
    up.enqueue({ kind: 'error', status: 500, message: 'boom', type: 'server_error' });
    const failed = await client.chat.completions.create({ model: 'chatty', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    assert.ok(failed instanceof OpenAI.APIError);
    const failedStatus = String(failed.status);
    // not a GenAI operation: no gen_ai series
    assert.equal((await fetch(`${gw.url}/v1/models`)).status, 200);

    const text = await (await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })).text();
    const chat = { gen_ai_operation_name: 'chat', gen_ai_provider_name: 'openai', gen_ai_request_model: 'chatty' };
    const input = { ...chat, gen_ai_token_type: 'input' };
    assert.equal(sample(text, 'gen_ai_client_token_usage_count', input), 1);
    assert.equal(sample(text, 'gen_ai_client_token_usage_sum', input), 1000);
    // bucket bounds are the conventions' powers of 4: 1000 tokens lie above 256, within 1024
    assert.equal(sample(text, 'gen_ai_client_token_usage_bucket', { ...input, le: '256' }), 0);
    assert.equal(sample(text, 'gen_ai_client_token_usage_bucket', { ...input, le: '1024' }), 1);
    assert.equal(sample(text, 'gen_ai_client_token_usage_bucket', { ...input, le: '67108864' }), 1);
    assert.equal(sample(text, 'gen_ai_client_token_usage_sum', { ...chat, gen_ai_token_type: 'output' }), 20);

    const fam = { gen_ai_operation_name: 'chat', gen_ai_provider_name: 'openai', gen_ai_request_model: 'fam-*' };
    assert.equal(sample(text, 'gen_ai_client_token_usage_sum', { ...fam, gen_ai_token_type: 'output' }), 5);
    assert.ok(!text.includes('fam-xyz-123'), 'a client-chosen name never becomes a label value');

    const emb = { gen_ai_operation_name: 'embeddings', gen_ai_provider_name: 'switchyard.fake', gen_ai_request_model: 'vectors' };
    assert.equal(sample(text, 'gen_ai_client_token_usage_count', { ...emb, gen_ai_token_type: 'input' }), 1);
    assert.equal(sample(text, 'gen_ai_client_operation_duration_seconds_count', { ...emb, error_type: '' }), 1);

    // one success and one failure of `chatty`, told apart by error_type
    assert.equal(sample(text, 'gen_ai_client_operation_duration_seconds_count', { ...chat, error_type: '' }), 1);
    assert.equal(sample(text, 'gen_ai_client_operation_duration_seconds_count', { ...chat, error_type: failedStatus }), 1);
    assert.equal(sample(text, 'gen_ai_client_operation_duration_seconds_bucket', { ...chat, error_type: '', le: '81.92' }), 1);
    assert.match(text, /^# TYPE gen_ai_client_operation_duration_seconds histogram$/m);
    assert.match(text, /^# TYPE gen_ai_client_token_usage histogram$/m);
    // the gateway's own metrics are still there
    assert.ok((sample(text, 'switchyard_requests_total', { route: '/v1/chat/completions', model: 'chatty', backend: 'up', status_class: '2xx', cache: 'none' }) ?? 0) >= 1);
  });
});

describe('a real Prometheus server scraping the gateway', { skip }, () => {
  const N = 7;
  let up: FakeUpstream;
  let gw: TestGateway;
  let dir: string;
  let prom: ChildProcess | undefined;
  let promUrl: string;
  let promLog = '';

  before(async () => {
    up = await startFakeOpenAI();
    gw = await startGateway(CONFIG(up.url));
    dir = mkdtempSync(join(tmpdir(), 'switchyard-prometheus-'));
    const target = new URL(gw.url).host;
    writeFileSync(
      join(dir, 'prometheus.yml'),
      [
        'global: { scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s }',
        'scrape_configs:',
        '  - job_name: switchyard',
        '    metrics_path: /metrics',
        `    authorization: { type: Bearer, credentials: "${ADMIN}" }`,
        `    static_configs: [ { targets: [ "${target}" ] } ]`,
        '',
      ].join('\n'),
    );
    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    prom = spawn('prometheus', [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    // in CI without the binary: a failure that says so (never a skip)
    prom.once('error', (e) => {
      promLog += `\ncannot start prometheus: ${e.message}`;
    });
    prom.stderr?.on('data', (d: Buffer) => {
      promLog = (promLog + d.toString()).slice(-4000);
    });
    await until('prometheus is ready', async () => (await fetch(`${promUrl}/-/ready`).catch(() => undefined))?.status === 200, 30_000);
  });
  after(async () => {
    if (prom?.pid !== undefined && prom.exitCode === null) {
      const exited = new Promise((resolve) => prom?.once('exit', resolve));
      process.kill(prom.pid, 'SIGTERM');
      await Promise.race([exited, sleep(10_000)]);
      if (prom.exitCode === null && prom.signalCode === null) process.kill(prom.pid, 'SIGKILL');
    }
    await gw?.close();
    await up?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** The single value of an instant query, or undefined while it has no result. */
  async function query(q: string): Promise<number | undefined> {
    const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(q)}`);
    assert.equal(res.status, 200, `query ${q}`);
    const body = (await res.json()) as { status: string; data: { resultType: string; result: Array<{ value: [number, string] }> } };
    assert.equal(body.status, 'success');
    const first = body.data.result[0];
    return first === undefined ? undefined : Number(first.value[1]);
  }

  async function until(what: string, f: () => Promise<boolean>, ms: number): Promise<void> {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      if (await f()) return;
      if (prom?.exitCode !== null && prom?.exitCode !== undefined) assert.fail(`prometheus exited (${prom.exitCode}): ${promLog}`);
      if (prom?.pid === undefined) assert.fail(`prometheus did not start: ${promLog}`);
      await sleep(200);
    }
    assert.fail(`timed out waiting for: ${what}\n${promLog}`);
  }

  it(`counts the ${N} requests sent in sum(switchyard_requests_total), through PromQL`, async () => {
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: 'unused', maxRetries: 0 });
    for (let i = 0; i < N; i++) await client.chat.completions.create({ model: 'chatty', messages: [{ role: 'user', content: `q${i}` }] });

    let seen: number | undefined;
    await until(
      `a scrape showing ${N} requests`,
      async () => {
        seen = await query('sum(switchyard_requests_total)');
        return seen === N;
      },
      30_000,
    );
    assert.equal(seen, N);
    // the scrape went through the admin guard, and the GenAI histograms came along
    assert.equal(await query('up{job="switchyard"}'), 1);
    assert.equal(await query('sum(gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name="chat",gen_ai_request_model="chatty"})'), N);
    assert.ok(((await query('sum(gen_ai_client_token_usage_sum{gen_ai_token_type="input"})')) ?? 0) > 0);
  });
});
