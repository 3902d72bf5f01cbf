/**
 * Large non-streaming chat answers are read into buffers lent by the body pool and given back
 * once parsed (src/backends/upstream/client.ts, `parseJsonOnce`). What a client must never see:
 * another answer's text. Every answer here is distinct (its content comes from the request) and
 * compared with what the upstream sent, in sequence with sizes going up and down (so a reused
 * buffer longer than the answer would show) and concurrently.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bodyPool } from '../src/backends/upstream/body-pool.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';
import { startJsonUpstream, type JsonUpstream } from './support/json-upstream.ts';

/** The content the upstream answers for a prompt: `size` characters, distinct per prompt. */
function content(prompt: string, size: number): string {
  const unit = `${prompt}|`;
  return unit.repeat(Math.ceil(size / unit.length)).slice(0, size);
}

let upstream: JsonUpstream;
let gw: TestGateway;

before(async () => {
  upstream = await startJsonUpstream((body) => {
    const prompt = (body.messages as Array<{ content: string }>)[0]?.content ?? '';
    const size = Number(prompt.split(':')[0]);
    const text = JSON.stringify({
      id: `chatcmpl-${prompt.length}`,
      object: 'chat.completion',
      created: 1,
      model: body.model,
      choices: [{ index: 0, message: { role: 'assistant', content: content(prompt, size) }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 },
    });
    return { text };
  });
  gw = await startGateway(`
backends:
  up: { type: openai, base_url: "${upstream.baseURL}", api_key: sk-pool-test }
models:
  big: { targets: [ { backend: up, model: big } ] }
`);
});

after(async () => {
  await gw.close();
  await upstream.close();
});

let n = 0;
async function ask(size: number): Promise<{ prompt: string; got: string }> {
  const prompt = `${size}:${++n}:${Date.now()}`;
  const res = await fetch(`${gw.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'big', messages: [{ role: 'user', content: prompt }] }),
  });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
  return { prompt, got: body.choices[0]?.message.content ?? '' };
}

describe('large chat answers in reused buffers', () => {
  it('each answer is its own, in sequence with sizes up and down, and the buffers go back to the pool', async () => {
    const idleBefore = bodyPool.idleSize;
    for (const size of [70_000, 300_000, 90_000, 1_200_000, 66_000, 300_000, 70_000]) {
      const { prompt, got } = await ask(size);
      assert.equal(got.length, size);
      assert.equal(got, content(prompt, size), `answer of ${size} characters`);
    }
    assert.ok(bodyPool.idleSize > idleBefore, `buffers given back after parsing (idle ${idleBefore} → ${bodyPool.idleSize} bytes)`);
  });

  it('concurrent answers stay apart', async () => {
    const sizes = [70_000, 120_000, 70_000, 250_000, 90_000, 70_000, 120_000, 400_000];
    const results = await Promise.all(sizes.map((s) => ask(s)));
    results.forEach(({ prompt, got }, i) => assert.equal(got, content(prompt, sizes[i] as number), `answer ${i}`));
  });
});
