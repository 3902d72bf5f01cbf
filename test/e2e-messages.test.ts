/**
 * End to end for `/v1/messages`: the real `@anthropic-ai/sdk` and LangChain's `ChatAnthropic`
 * pointed at Switchyard, routed to chat backends (the OpenAI fake and the llama-server fake,
 * translated): create, stream with finalMessage, a tool-use round trip, countTokens, failover
 * before the first content event, a cut after it, and errors surfacing as the SDK's typed classes.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { ChatAnthropic } from '@langchain/anthropic';
import { HumanMessage } from '@langchain/core/messages';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';
import { startFakeLlamaServer, type FakeLlamaServer } from './support/fake-llama-server.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';

const KEY = 'sk-gw-messages-main-0001';
const SLOW_KEY = 'sk-gw-messages-rpm1-0001';

async function rejection(p: PromiseLike<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  return assert.fail('expected the call to fail');
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

describe('e2e: Anthropic SDK / ChatAnthropic → Switchyard /v1/messages → chat backends', () => {
  let openai: FakeUpstream;
  let llama: FakeLlamaServer;
  let gw: TestGateway;
  let keyed: TestGateway;
  let client: Anthropic;

  const sdk = (url: string, key = 'unused'): Anthropic => new Anthropic({ baseURL: url, apiKey: key, maxRetries: 0 });

  before(async () => {
    openai = await startFakeOpenAI({ apiKey: 'sk-upstream' });
    llama = await startFakeLlamaServer({ alias: 'qwen-test' });
    const backends = `
backends:
  oa: { type: openai, base_url: "${openai.url}", api_key: sk-upstream }
  local: { type: llamacpp, base_url: "${llama.url}" }
routing:
  retry: { max_retries: 0 }
  breaker: { consecutive_failures: 0, min_requests: 100000 }
models:
  claude-gw: { targets: [ { backend: oa, model: gpt-4o-mini } ] }
  local: { targets: [ { backend: local, model: qwen-test } ] }
  mixed: { policy: fallback, targets: [ { backend: oa, model: gpt-4o-mini }, { backend: local, model: qwen-test } ] }
`;
    gw = await startGateway(backends);
    keyed = await startGateway(`${backends}
keys:
  - { name: main, key: "${KEY}", models: [claude-gw] }
  - { name: slow, key: "${SLOW_KEY}", limits: { rpm: 1 } }
`);
    client = sdk(gw.url);
  });
  after(async () => {
    await gw.close();
    await keyed.close();
    await openai.close();
    await llama.close();
  });

  test('create: a Message with text, end_turn and usage; the public model name', async () => {
    const { data: m, response } = await client.messages
      .create({ model: 'claude-gw', max_tokens: 64, messages: [{ role: 'user', content: 'hello' }] })
      .withResponse();
    assert.equal(response.headers.get('x-switchyard-backend'), 'oa');
    assert.match(m.id, /^msg_/);
    assert.equal(m.model, 'claude-gw');
    assert.equal(m.stop_reason, 'end_turn');
    assert.deepEqual(
      m.content.map((b) => (b.type === 'text' ? b.text : b.type)),
      ['Hello from gpt-4o-mini'],
    );
    assert.ok(m.usage.output_tokens > 0);
  });

  test('stream with finalMessage, against llama-server: text deltas and the final message', async () => {
    const stream = client.messages.stream({ model: 'local', max_tokens: 64, messages: [{ role: 'user', content: 'tell me' }] });
    let text = '';
    stream.on('text', (t) => {
      text += t;
    });
    const m = await stream.finalMessage();
    assert.equal(text, 'llama says: tell me');
    assert.equal(m.model, 'local');
    assert.equal(m.stop_reason, 'end_turn');
    assert.deepEqual(
      m.content.map((b) => (b.type === 'text' ? b.text : b.type)),
      ['llama says: tell me'],
    );
    assert.ok(m.usage.output_tokens > 0);
  });

  test('llama-server reasoning becomes a thinking block', async () => {
    const m = await client.messages.stream({ model: 'local', max_tokens: 64, messages: [{ role: 'user', content: 'think: the sky' }] }).finalMessage();
    assert.deepEqual(
      m.content.map((b) => b.type),
      ['thinking', 'text'],
    );
    const t = m.content[0];
    assert.ok(t?.type === 'thinking');
    assert.equal(t.thinking, 'thinking about the sky');
  });

  test('tool-use round trip: tool_use block out, tool_result in, answer back', async () => {
    const tools: Anthropic.Tool[] = [
      { name: 'get_weather', description: 'Current weather', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
    ];
    const question: Anthropic.MessageParam = { role: 'user', content: 'What is the weather in Paris?' };
    const first = await client.messages.stream({ model: 'claude-gw', max_tokens: 64, tools, messages: [question] }).finalMessage();
    assert.equal(first.stop_reason, 'tool_use');
    const use = first.content.find((b) => b.type === 'tool_use');
    assert.ok(use?.type === 'tool_use');
    assert.equal(use.name, 'get_weather');
    assert.deepEqual(use.input, { city: 'Paris' });

    const second = await client.messages.create({
      model: 'claude-gw',
      max_tokens: 64,
      tools,
      messages: [question, { role: 'assistant', content: first.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '18 C, sunny' }] }],
    });
    assert.equal(second.stop_reason, 'end_turn');
    const up = openai.requests.at(-1);
    assert.ok(up && isRecord(up.body));
    const msgs = up.body.messages as Array<Record<string, unknown>>;
    const assistant = msgs.find((m) => m.role === 'assistant');
    assert.ok(assistant && Array.isArray(assistant.tool_calls));
    const tool = msgs.find((m) => m.role === 'tool');
    assert.ok(tool);
    assert.equal(tool.content, '18 C, sunny');
    assert.equal(tool.tool_call_id, (assistant.tool_calls[0] as { id: string }).id);
  });

  test('countTokens: a positive estimate', async () => {
    const r = await client.messages.countTokens({ model: 'claude-gw', messages: [{ role: 'user', content: 'How many tokens are in this message?' }] });
    assert.ok(r.input_tokens > 5 && r.input_tokens < 40, String(r.input_tokens));
  });

  test('failover before the first content event: OpenAI 503 → llama-server serves the stream', async () => {
    openai.enqueue({ kind: 'error', status: 503, message: 'overloaded' });
    const { response, data } = await client.messages
      .create({ model: 'mixed', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'fall over' }] })
      .withResponse();
    assert.equal(response.headers.get('x-switchyard-backend'), 'local');
    let text = '';
    let stop: string | null | undefined;
    for await (const e of data) {
      if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
      if (e.type === 'message_delta') stop = e.delta.stop_reason;
    }
    assert.equal(text, 'llama says: fall over');
    assert.equal(stop, 'end_turn');
  });

  test('a cut after content reaches the SDK as an error, not a clean end', async () => {
    openai.enqueue({ kind: 'stream', chunks: ['one ', 'two ', 'three'], dropAfter: 2 });
    const stream = client.messages.stream({ model: 'claude-gw', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] });
    const err = await rejection(stream.finalMessage());
    assert.ok(err instanceof Anthropic.APIError, String(err));
  });

  test('ChatAnthropic (anthropicApiUrl): invoke and stream through a chat backend', async () => {
    const model = new ChatAnthropic({ model: 'claude-gw', anthropicApiUrl: gw.url, apiKey: 'unused', maxRetries: 0, maxTokens: 64 });
    const res = await model.invoke([new HumanMessage('hello')]);
    assert.equal(res.content, 'Hello from gpt-4o-mini');
    let streamed = '';
    for await (const chunk of await model.stream([new HumanMessage('hello')])) {
      if (typeof chunk.content === 'string') streamed += chunk.content;
      else for (const p of chunk.content) if (isRecord(p) && typeof p.text === 'string') streamed += p.text;
    }
    assert.equal(streamed, 'Hello from gpt-4o-mini');
  });

  test('errors as the SDK typed classes', async () => {
    const bad = await rejection(sdk(keyed.url, 'sk-wrong').messages.create({ model: 'claude-gw', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }));
    assert.ok(bad instanceof Anthropic.AuthenticationError, String(bad));

    const main = sdk(keyed.url, KEY);
    const missing = await rejection(main.messages.create({ model: 'no-such-model', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }));
    assert.ok(missing instanceof Anthropic.NotFoundError, String(missing));
    // a model outside the key's list answers as if it did not exist
    const hidden = await rejection(main.messages.countTokens({ model: 'local', messages: [{ role: 'user', content: 'x' }] }));
    assert.ok(hidden instanceof Anthropic.NotFoundError, String(hidden));

    const noMax = await rejection(main.messages.create({ model: 'claude-gw', messages: [{ role: 'user', content: 'x' }] } as unknown as Anthropic.MessageCreateParamsNonStreaming));
    assert.ok(noMax instanceof Anthropic.BadRequestError, String(noMax));
    assert.match(noMax.message, /max_tokens/);

    const slow = sdk(keyed.url, SLOW_KEY);
    await slow.messages.create({ model: 'claude-gw', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] });
    const limited = await rejection(slow.messages.create({ model: 'claude-gw', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }));
    assert.ok(limited instanceof Anthropic.RateLimitError, String(limited));
    assert.ok(Number(limited.headers.get('retry-after')) > 0);
    assert.equal(limited.type, 'rate_limit_error');
  });
});
