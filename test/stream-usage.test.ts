/**
 * `stream_options.include_usage` on chat streams, whatever the backend: as OpenAI sends it, every
 * ordinary chunk carries `"usage": null` (the key present) and the last chunk, with `choices: []`,
 * carries the usage object. Without include_usage no chunk has a `usage` key at all.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic-upstream.ts';
import { startFakeLlamaServer, type FakeLlamaServer } from './support/fake-llama-server.ts';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';

const KEY = 'sk-stream-usage-test-key';

type Chunk = Record<string, unknown> & { choices?: unknown[] };

/** The parsed `data:` events of an SSE body, up to `[DONE]` (which must end it). */
async function streamChunks(gw: TestGateway, model: string, includeUsage: boolean | undefined, content = 'one two three four', cache?: string): Promise<Chunk[]> {
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model,
      stream: true,
      temperature: 0,
      ...(includeUsage === undefined ? {} : { stream_options: { include_usage: includeUsage } }),
      messages: [{ role: 'user', content }],
    }),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  if (cache !== undefined) assert.equal(res.headers.get('x-switchyard-cache'), cache);
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
  const data = text
    .split('\n\n')
    .filter((e) => e.trim() !== '')
    .map((e) => e.replace(/^data: /, ''));
  assert.equal(data.at(-1), '[DONE]', text);
  return data.slice(0, -1).map((d) => JSON.parse(d) as Chunk);
}

/** Every chunk but the last has `"usage": null` and one choice; the last has the usage object and none. */
function assertUsageNullUntilLast(chunks: Chunk[]): void {
  assert.ok(chunks.length >= 3, JSON.stringify(chunks));
  const last = chunks.at(-1) as Chunk;
  assert.deepEqual(last.choices, [], JSON.stringify(last));
  const usage = last.usage as Record<string, unknown> | null | undefined;
  assert.equal(typeof usage?.prompt_tokens, 'number', JSON.stringify(last));
  assert.equal(typeof usage?.completion_tokens, 'number', JSON.stringify(last));
  assert.equal(typeof usage?.total_tokens, 'number', JSON.stringify(last));
  for (const c of chunks.slice(0, -1)) {
    assert.ok('usage' in c, `no "usage" key in ${JSON.stringify(c)}`);
    assert.equal(c.usage, null, JSON.stringify(c));
    assert.equal((c.choices ?? []).length, 1, JSON.stringify(c));
  }
}

describe('usage in chat streams', () => {
  let gw: TestGateway | undefined;
  let anthropic: FakeAnthropic | undefined;
  let openai: FakeUpstream | undefined;
  let llama: FakeLlamaServer | undefined;

  before(async () => {
    anthropic = await startFakeAnthropic({ apiKey: KEY });
    openai = await startFakeOpenAI({ apiKey: KEY });
    llama = await startFakeLlamaServer();
    gw = await startGateway(`
backends:
  claude: { type: anthropic, base_url: "${anthropic.url}", api_key: "${KEY}" }
  gpt:    { type: openai, base_url: "${openai.url}", api_key: "${KEY}" }
  local:  { type: llamacpp, base_url: "${llama.url}" }
  fake:   { type: fake }
models:
  claude: { targets: [ { backend: claude, model: claude-3-5-haiku-latest } ] }
  gpt:    { targets: [ { backend: gpt, model: gpt-4o-mini } ] }
  local:  { targets: [ { backend: local, model: qwen } ] }
  fake:   { targets: [ { backend: fake, model: echo } ] }
cache: { enabled: true }
`);
  });

  after(async () => {
    await gw?.close();
    await anthropic?.close();
    await openai?.close();
    await llama?.close();
  });

  for (const model of ['claude', 'fake', 'local', 'gpt']) {
    it(`${model}: with include_usage every ordinary chunk has "usage": null and the last the usage`, async () => {
      const chunks = await streamChunks(gw as TestGateway, model, true, `with usage ${model} one two three`);
      assertUsageNullUntilLast(chunks);
    });

    it(`${model}: without include_usage no chunk has a "usage" key`, async () => {
      for (const include of [undefined, false]) {
        const chunks = await streamChunks(gw as TestGateway, model, include, `without usage ${model} ${include} one two three`);
        assert.ok(chunks.length >= 2, JSON.stringify(chunks));
        for (const c of chunks) {
          assert.ok(!('usage' in c), `include_usage ${include}: "usage" in ${JSON.stringify(c)}`);
          assert.equal((c.choices ?? []).length, 1, JSON.stringify(c));
        }
      }
    });
  }

  it('a cached stream replayed to a client that asks for usage has it too', async () => {
    for (const model of ['claude', 'local']) {
      const content = `cached ${model} one two three`;
      const first = await streamChunks(gw as TestGateway, model, undefined, content, 'miss');
      for (const c of first) assert.ok(!('usage' in c), JSON.stringify(c));
      assertUsageNullUntilLast(await streamChunks(gw as TestGateway, model, true, content, 'hit'));
      for (const c of await streamChunks(gw as TestGateway, model, false, content, 'hit')) assert.ok(!('usage' in c), JSON.stringify(c));
    }
  });
});
