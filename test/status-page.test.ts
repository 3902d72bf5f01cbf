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

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
const OUT = join(import.meta.dirname, '..', 'test-output');
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
backends:
  demo: { type: fake }
  nokey: { type: openai, base_url: "http://127.0.0.1:1/v1", api_key: "\${NO_SUCH_KEY:-}" }
models:
  demo-chat: { policy: fallback, targets: [ { backend: nokey, model: gpt-x, price: { input: 1, output: 2 } }, { backend: demo, model: echo } ] }
  demo-embed: { targets: [ { backend: demo, model: fake-embedding } ] }
`);
    for (let i = 0; i < 3; i++) {
      await fetch(`${gw.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'demo-chat', messages: [{ role: 'user', content: 'hello' }] }),
      });
    }
  });
  after(() => gw.close());

  it('renders the models table and writes a screenshot', async () => {
    mkdirSync(OUT, { recursive: true });
    const shot = join(OUT, 'status-page.png');
    rmSync(shot, { force: true });
    const r = await chromium(['--window-size=1280,720', `--screenshot=${shot}`, `${gw.url}/`]);
    assert.ok(existsSync(shot), `no screenshot: ${r.stderr.slice(-500)}`);
    assert.ok(statSync(shot).size > 5000, 'a real image, not an empty one');

    const dom = (await chromium(['--dump-dom', `${gw.url}/`])).stdout;
    assert.match(dom, /<title>Switchyard status<\/title>/);
    for (const text of ['demo-chat', 'demo-embed', 'gpt-x', 'echo', 'unconfigured', 'closed']) assert.ok(dom.includes(text), `page shows ${text}`);
  });
});
