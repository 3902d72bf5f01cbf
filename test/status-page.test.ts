/**
 * The human status page rendered by a real browser: headless Chromium (Debian's `chromium`) loads
 * GET / from a gateway that has served some traffic and takes a screenshot into test-output/.
 * The page's DOM (dumped by Chromium after rendering) must show every model and target.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startGateway, type TestGateway } from './support/gateway.ts';
import { pageText, tableRows } from './support/status-html.ts';

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
const OUT = join(import.meta.dirname, '..', 'test-output');
const ADMIN = 'admin-key-0123456789abcdef';
const TEAM = 'sk-gw-team-a-123456';
const skip = !CHROMIUM && !process.env.CI ? 'chromium is not installed (apt-get install -y chromium)' : false;

/** Runs Chromium asynchronously: the gateway it talks to lives in this same process. */
async function chromium(args: string[]): Promise<{ stdout: string; stderr: string; status: number | null }> {
  const profile = mkdtempSync(join(tmpdir(), 'switchyard-chromium-'));
  try {
    return await new Promise((resolve, reject) => {
      const child = spawn(
        CHROMIUM ?? 'chromium',
        [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
          `--user-data-dir=${profile}`,
          ...args,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      child.once('error', reject);
      child.once('close', (status) => {
        clearTimeout(timer);
        resolve({ stdout, stderr, status });
      });
    });
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
}

describe('status page in headless Chromium', { skip }, () => {
  let gw: TestGateway;

  before(async () => {
    gw = await startGateway(`
routing: { retry: { max_retries: 0 }, breaker: { consecutive_failures: 5, open_ms: 600000, max_open_ms: 600000 } }
admin: { key: "${ADMIN}" }
backends:
  demo: { type: fake }
  nokey: { type: openai, base_url: "http://127.0.0.1:1/v1", api_key: "\${NO_SUCH_KEY:-}" }
  refused: { type: openai, base_url: "http://127.0.0.1:1/v1", api_key: "sk-refused-0000000" }
models:
  demo-chat: { policy: fallback, targets: [ { backend: nokey, model: gpt-x, price: { input: 1, output: 2 } }, { backend: demo, model: echo } ] }
  demo-embed: { targets: [ { backend: demo, model: fake-embedding } ] }
  two: { policy: fallback, targets: [ { backend: refused, model: gone }, { backend: demo, model: echo } ] }
cache: { enabled: true }
keys:
  - { name: team-a, key: "${TEAM}", limits: { rpm: 100, max_concurrent: 4 } }
`);
    const ask = (model: string, content: string): Promise<Response> =>
      fetch(`${gw.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEAM}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, temperature: 0, messages: [{ role: 'user', content }] }),
      });
    for (let i = 0; i < 3; i++) await ask('demo-chat', 'hello');
    // five refused connections in a row open the first target's breaker; each request fails over
    for (let i = 0; i < 6; i++) assert.equal((await ask('two', `question ${i}`)).status, 200);
  });
  after(() => gw.close());

  it('renders the models table and writes a screenshot', async () => {
    // the page takes the admin key as a Basic password; Chromium sends the URL's credentials
    const page = `http://ops:${ADMIN}@${gw.url.slice('http://'.length)}/`;
    mkdirSync(OUT, { recursive: true });
    const shot = join(OUT, 'status-page.png');
    rmSync(shot, { force: true });
    const r = await chromium(['--window-size=1600,900', `--screenshot=${shot}`, page]);
    assert.ok(existsSync(shot), `no screenshot: ${r.stderr.slice(-500)}`);
    assert.ok(statSync(shot).size > 5000, 'a real image, not an empty one');

    const dom = (await chromium(['--dump-dom', page])).stdout;
    assert.match(dom, /<title>Switchyard status<\/title>/);
    for (const text of ['demo-chat', 'demo-embed', 'gpt-x', 'echo', 'unconfigured', 'closed']) assert.ok(dom.includes(text), `page shows ${text}`);

    // the target behind refused connections: open until a time, why, and its failures counted
    const rows = tableRows(dom, 'targets');
    const refused = rows.find((row) => row.backend === 'refused');
    // demo/echo serves two models: one health record, listed under both
    const echo = rows.find((row) => row.backend === 'demo' && row['upstream model'] === 'echo');
    assert.ok(refused && echo, JSON.stringify(rows));
    assert.match(refused.breaker ?? '', /^open until \d\d:\d\d:\d\dZ \(in \d+ s\)$/);
    assert.match(refused['last error'] ?? '', /^502 upstream_unreachable Could not reach backend "refused"/);
    assert.equal(refused['errors (recent calls)'], '100.0 % 0 ok / 5 failed');
    assert.equal(refused['latency p50 / p95 ms'], '—', 'no success, no measured latency');
    assert.ok(Number(refused['latency score (policy)']) >= 10_000, 'the policy score, under its own label');
    assert.match(echo['latency p50 / p95 ms'] ?? '', /^\d+(\.\d)? \/ \d+(\.\d)? 7 ok$/, 'one miss of demo-chat, six of two');

    // cache and keys as tables, no JSON on the page
    assert.deepEqual(tableRows(dom, 'cache'), [{ enabled: 'yes', entries: '7', hits: '2', misses: '7', bypassed: '0', coalesced: '0', 'hit ratio': '22.2 %' }]);
    const keys = tableRows(dom, 'keys');
    assert.deepEqual(keys.map((k) => [k.key, k['concurrent in use / limit']]), [['team-a', '0 / 4']]);
    // the rpm allowance refills as time passes: the count is what is used now
    assert.match(keys[0]?.['requests used / limit'] ?? '', /^\d+ \/ 100 per min$/);
    assert.ok(!pageText(dom).includes('{'), 'no raw JSON on the page');
  });
});
