/**
 * Process lifecycle and logs: SIGTERM while a stream is in flight (the stream completes, new
 * connections are refused, the process exits 0), and secrets sent by a client never reach a log line.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startGateway } from './support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from './support/gateway-process.ts';


async function startProcess(yaml: string): Promise<GatewayProcess & { dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-life-'));
  return { ...(await startGatewayProcess(join(dir, 'providers.yaml'), yaml, 20_000)), dir };
}

describe('SIGTERM drains', () => {
  it('lets an in-flight stream finish, refuses new connections, and exits 0', async () => {
    const p = await startProcess(`
server: { shutdown_grace_ms: 10000 }
backends: { slow: { type: fake, chunk_delay_ms: 80 } }
models: { m: { targets: [ { backend: slow, model: echo } ] } }
`);
    try {
      const res = await fetch(`${p.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'one two three four five six seven eight nine ten' }] }),
      });
      assert.equal(res.status, 200);
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      const dec = new TextDecoder();
      let text = '';
      while (!text.includes('"content":"echo: "')) {
        const r = await reader.read();
        assert.ok(!r.done, 'stream ended before content');
        text += dec.decode(r.value, { stream: true });
      }
      const exited = new Promise<number | null>((r) => p.child.once('exit', (code) => r(code)));
      p.child.kill('SIGTERM');
      // new connections are refused once the listener has closed
      await new Promise((r) => setTimeout(r, 300));
      await assert.rejects(fetch(`${p.url}/health`, { headers: { connection: 'close' } }), 'new connection refused while draining');
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
        text += dec.decode(r.value, { stream: true });
      }
      assert.ok(text.endsWith('data: [DONE]\n\n'), 'the in-flight stream completed');
      assert.ok(text.includes('"content":"ten"'), 'with all its content');
      assert.equal(await exited, 0);
      assert.match(p.output(), /"msg":"draining"/);
      assert.match(p.output(), /"msg":"stopped"/);
    } finally {
      p.child.kill('SIGKILL');
      rmSync(p.dir, { recursive: true, force: true });
    }
  });
});

describe('logs', () => {
  it('a secret in the body, the headers or the key never appears in any log line', async () => {
    const KEY = 'sk-gw-CLIENT-SECRET-9f8e7d';
    const SECRET = 'PASSWORD-in-prompt-31337';
    const UPSTREAM = 'sk-upstream-SECRET-c0ffee';
    const gw = await startGateway(`
backends:
  demo: { type: fake }
  up: { type: openai, base_url: "http://127.0.0.1:1/v1", api_key: "${UPSTREAM}" }
models:
  m: { targets: [ { backend: demo, model: echo } ] }
  broken: { targets: [ { backend: up, model: x } ] }
keys: [ { name: team-a, key: "${KEY}" } ]
`);
    try {
      const headers = { 'content-type': 'application/json', authorization: `Bearer ${KEY}`, 'x-api-key': SECRET, cookie: `session=${SECRET}` };
      const bodies = [
        { model: 'm', messages: [{ role: 'user', content: `my password is ${SECRET}` }] },
        { model: 'm', stream: true, messages: [{ role: 'user', content: SECRET }] },
        { model: 'broken', messages: [{ role: 'user', content: SECRET }] },
        { model: 'm', messages: [{ role: 'user', content: 5, note: SECRET }] },
      ];
      for (const b of bodies) await (await fetch(`${gw.baseURL}/chat/completions`, { method: 'POST', headers, body: JSON.stringify(b) })).text();
      await (await fetch(`${gw.baseURL}/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${SECRET}` }, body: '{}' })).text();
      await new Promise((r) => setTimeout(r, 50));
      assert.ok(gw.logs.length >= 5, 'one line per request');
      for (const line of gw.logs) {
        for (const s of [KEY, SECRET, UPSTREAM, 'my password']) assert.ok(!line.includes(s), `log line leaks ${s}: ${line}`);
        JSON.parse(line);
      }
      assert.ok(gw.logs.some((l) => l.includes('"key":"team-a"')), 'the key is logged by name');
    } finally {
      await gw.close();
    }
  });
});
