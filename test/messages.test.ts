/**
 * `POST /v1/messages` and `/v1/messages/count_tokens` on the wire (plain HTTP), translated to chat
 * backends: the Message object and the stream's event sequence as Anthropic documents them, errors
 * in Anthropic's envelope, failover before the commit point, a cut after it as an `error` event,
 * the warnings header, and what a Claude-Code-like request makes of it. Thinking translated from a
 * chat backend's reasoning is signed by the gateway, and such blocks never reach Anthropic.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { upstreamsWithGateway } from './support/suite.ts';
import { startFakeLlamaServer, type FakeLlamaServer } from './support/fake-llama-server.ts';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic-upstream.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';

type Json = Record<string, unknown>;
const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

interface SseEvent {
  event: string;
  data: Json;
}

function parseSse(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  for (const block of text.split('\n\n')) {
    if (block.trim() === '') continue;
    let event = '';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data.push(line.slice(6));
    }
    out.push({ event, data: JSON.parse(data.join('\n')) as Json });
  }
  return out;
}

const ctx = upstreamsWithGateway({
  upstreams: { first: {}, second: {} },
  yaml: ({ first, second }) => `
backends:
  a: { type: openai, base_url: "${first.url}", api_key: sk-a }
  b: { type: openai, base_url: "${second.url}", api_key: sk-b }
routing:
  retry: { max_retries: 0 }
  breaker: { consecutive_failures: 0, min_requests: 100000 }
models:
  claude-sonnet: { targets: [ { backend: a, model: gpt-4o-mini } ] }
  two: { policy: fallback, targets: [ { backend: a, model: gpt-4o-mini }, { backend: b, model: gpt-4o } ] }
`,
});

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${ctx.gw.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers },
    body: JSON.stringify(body),
  });
}

const hello = { model: 'claude-sonnet', max_tokens: 100, messages: [{ role: 'user', content: 'hello there' }] };

describe('/v1/messages on the wire, translated to a chat backend', () => {
  test('JSON: the Message object with the public model name, stop reason and usage', async () => {
    const res = await post('/v1/messages', hello);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(res.headers.get('x-switchyard-backend'), 'a');
    assert.ok(res.headers.get('x-request-id'));
    const m = (await res.json()) as Json;
    assert.match(String(m.id), /^msg_/);
    assert.equal(m.type, 'message');
    assert.equal(m.role, 'assistant');
    assert.equal(m.model, 'claude-sonnet');
    assert.deepEqual(m.content, [{ type: 'text', text: 'Hello from gpt-4o-mini' }]);
    assert.equal(m.stop_reason, 'end_turn');
    assert.ok(isRecord(m.usage));
    assert.equal(typeof m.usage.input_tokens, 'number');
    assert.ok((m.usage.output_tokens as number) > 0);
    const up = ctx.first.requests.at(-1);
    assert.ok(up && isRecord(up.body));
    assert.equal(up.body.model, 'gpt-4o-mini');
    assert.equal(up.body.max_tokens, 100);
  });

  test('stream (?beta=true): the event sequence ends with message_delta (stop_reason) and message_stop', async () => {
    const res = await post('/v1/messages?beta=true', { ...hello, stream: true });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.equal(res.headers.get('x-switchyard-backend'), 'a');
    const events = parseSse(await res.text());
    const names = events.map((e) => e.event);
    assert.equal(names[0], 'message_start');
    assert.equal(names[1], 'content_block_start');
    assert.deepEqual(names.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
    for (const e of events) assert.equal(e.data.type, e.event);
    const start = events[0]?.data.message;
    assert.ok(isRecord(start));
    assert.equal(start.model, 'claude-sonnet');
    const text = events
      .filter((e) => e.event === 'content_block_delta')
      .map((e) => (isRecord(e.data.delta) ? e.data.delta.text : ''))
      .join('');
    assert.equal(text, 'Hello from gpt-4o-mini');
    const delta = events.at(-2)?.data;
    assert.ok(isRecord(delta) && isRecord(delta.delta) && isRecord(delta.usage));
    assert.equal(delta.delta.stop_reason, 'end_turn');
    assert.ok((delta.usage.output_tokens as number) > 0);
  });

  test('stream: message_start carries the prompt estimate, message_delta the upstream usage', async () => {
    const prompt = 'A longer question, with "quotes", caf\u00e9 and \u{1F600}: how many tokens is this prompt, roughly?';
    const body = { ...hello, stream: true, system: 'Answer briefly.', messages: [{ role: 'user', content: prompt }] };
    const counted = (await (await post('/v1/messages/count_tokens', { model: body.model, system: body.system, messages: body.messages })).json()) as Json;
    const events = parseSse(await (await post('/v1/messages', body)).text());
    const start = events[0]?.data.message;
    assert.ok(isRecord(start) && isRecord(start.usage));
    // LangChain's ChatAnthropic reads input tokens here only
    assert.equal(start.usage.input_tokens, counted.input_tokens);
    assert.ok((start.usage.input_tokens as number) > 10);
    const delta = events.find((e) => e.event === 'message_delta')?.data;
    assert.ok(isRecord(delta) && isRecord(delta.usage));
    assert.ok((delta.usage.input_tokens as number) > 0);
    assert.ok((delta.usage.output_tokens as number) > 0);
  });

  test('errors in Anthropic envelope: missing max_tokens 400, unknown model 404, with request ids', async () => {
    const bad = await post('/v1/messages', { model: 'claude-sonnet', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(bad.status, 400);
    const b = (await bad.json()) as Json;
    assert.equal(b.type, 'error');
    assert.ok(isRecord(b.error));
    assert.equal(b.error.type, 'invalid_request_error');
    assert.match(String(b.error.message), /max_tokens/);
    assert.equal(b.request_id, bad.headers.get('x-request-id'));

    const missing = await post('/v1/messages', { ...hello, model: 'no-such-model', stream: true });
    assert.equal(missing.status, 404);
    const n = (await missing.json()) as Json;
    assert.ok(isRecord(n.error));
    assert.equal(n.type, 'error');
    assert.equal(n.error.type, 'not_found_error');
  });

  test('every target unavailable: 529 overloaded_error', async () => {
    ctx.first.enqueue({ kind: 'error', status: 503, message: 'down' });
    const res = await post('/v1/messages', hello);
    assert.equal(res.status, 529);
    const b = (await res.json()) as Json;
    assert.ok(isRecord(b.error));
    assert.equal(b.error.type, 'overloaded_error');
  });

  test('stream: the first target 503 → the second serves, before any event was written', async () => {
    ctx.first.enqueue({ kind: 'error', status: 503, message: 'down' });
    const res = await post('/v1/messages', { ...hello, model: 'two', stream: true });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-switchyard-backend'), 'b');
    assert.equal(res.headers.get('x-switchyard-attempts'), '2');
    const events = parseSse(await res.text());
    assert.equal(events.filter((e) => e.event === 'message_start').length, 1);
    assert.equal(events.at(-1)?.event, 'message_stop');
    const text = events.map((e) => (isRecord(e.data.delta) && typeof e.data.delta.text === 'string' ? e.data.delta.text : '')).join('');
    assert.equal(text, 'Hello from gpt-4o');
  });

  test('stream cut after content: an error event ends it, no message_stop', async () => {
    ctx.first.enqueue({ kind: 'stream', chunks: ['one ', 'two ', 'three'], dropAfter: 2 });
    const res = await post('/v1/messages', { ...hello, stream: true });
    assert.equal(res.status, 200);
    const events = parseSse(await res.text());
    const names = events.map((e) => e.event);
    assert.equal(names[0], 'message_start');
    assert.ok(names.includes('content_block_delta'));
    assert.equal(names.at(-1), 'error');
    assert.ok(!names.includes('message_stop'));
    assert.ok(!names.includes('message_delta'));
    const err = events.at(-1)?.data.error;
    assert.ok(isRecord(err));
    assert.equal(typeof err.type, 'string');
  });

  test('a client that goes away mid-stream aborts the upstream request', async () => {
    ctx.first.enqueue({ kind: 'stream', chunks: ['a ', 'b ', 'c ', 'd ', 'e'], stallAfter: 1 });
    const res = await post('/v1/messages', { ...hello, stream: true });
    const reader = res.body?.getReader();
    assert.ok(reader);
    await reader.read();
    await reader.cancel();
    await ctx.first.waitForClientAbort();
    assert.equal(ctx.first.clientAborts, 1);
  });

  test('a Claude-Code-like request works against a chat backend and names what was dropped', async () => {
    const betas = [
      'claude-code-20250219',
      'oauth-2025-04-20',
      'interleaved-thinking-2025-05-14',
      'context-management-2025-06-27',
      'prompt-caching-scope-2026-01-05',
      'effort-2025-11-24',
      'advanced-tool-use-2025-11-20',
      'fine-grained-tool-streaming-2025-05-14',
    ];
    const body = {
      model: 'claude-sonnet',
      max_tokens: 128000,
      stream: true,
      system: [
        { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.332' },
        { type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral' } },
        { type: 'text', text: 'Be concise.', cache_control: { type: 'ephemeral', ttl: '1h' } },
      ],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'list the files', cache_control: { type: 'ephemeral' } }] },
        { role: 'system', content: 'The working directory is /repo.' },
      ],
      tools: [
        {
          name: 'Bash',
          description: 'Run a command',
          input_schema: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
        },
        { name: 'WebFetch', description: 'Fetch a URL', defer_loading: true, input_schema: { type: 'object', properties: { url: { type: 'string' } } } },
      ],
      metadata: { user_id: JSON.stringify({ device_id: 'd1', session_id: 's1' }) },
      thinking: { type: 'adaptive', display: 'omitted' },
      context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
      output_config: { effort: 'high' },
    };
    const res = await post('/v1/messages?beta=true', body, {
      authorization: 'Bearer whatever',
      'anthropic-beta': betas.join(','),
      'x-claude-code-session-id': 's1',
    });
    assert.equal(res.status, 200);
    const warnings = res.headers.get('x-switchyard-warnings') ?? '';
    assert.match(warnings, /thinking/);
    assert.match(warnings, /context_management/);
    assert.match(warnings, /output_config\.effort/);
    assert.match(warnings, /defer_loading/);
    assert.match(warnings, /^[\x20-\x7e]+$/);
    assert.ok(warnings.length <= 1024);
    const events = parseSse(await res.text());
    const delta = events.find((e) => e.event === 'message_delta');
    assert.ok(delta && isRecord(delta.data.delta));
    assert.equal(delta.data.delta.stop_reason, 'end_turn');
    assert.equal(events.at(-1)?.event, 'message_stop');

    const up = ctx.first.requests.at(-1);
    assert.ok(up && isRecord(up.body));
    const msgs = up.body.messages as Json[];
    assert.equal(msgs[0]?.role, 'system');
    assert.match(String(msgs[0]?.content), /You are Claude Code\.[\s\S]*The working directory is \/repo\./);
    assert.ok(msgs.slice(1).every((m) => m.role !== 'system'));
    assert.equal((up.body.tools as unknown[]).length, 2);
    assert.equal(up.body.max_tokens, 128000);
    for (const k of ['thinking', 'context_management', 'output_config', 'metadata']) assert.ok(!(k in up.body), k);
    const line = ctx.gw.logs.map((l) => JSON.parse(l) as Json).findLast((l) => l.route === '/v1/messages');
    assert.ok(line);
    assert.match(String(line.warnings), /context_management/);
  });

  test('count_tokens: an estimate for a known model; 404 in Anthropic envelope for an unknown one', async () => {
    const res = await post('/v1/messages/count_tokens', {
      model: 'claude-sonnet',
      system: 'You are a helpful assistant.',
      messages: [{ role: 'user', content: 'How many tokens is this sentence, roughly speaking?' }],
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as Json;
    assert.deepEqual(Object.keys(body), ['input_tokens']);
    assert.ok((body.input_tokens as number) > 10 && (body.input_tokens as number) < 60, String(body.input_tokens));
    const missing = await post('/v1/messages/count_tokens', { model: 'nope', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(missing.status, 404);
    const m = (await missing.json()) as Json;
    assert.equal(m.type, 'error');
    assert.ok(isRecord(m.error));
    assert.equal(m.error.type, 'not_found_error');
  });
});

describe('/v1/messages thinking blocks: signed by the gateway, kept from Anthropic', () => {
  const KEY = 'sk-ant-api03-signature-test';
  const SIG = /^swy1\.[A-Za-z0-9_-]{43}$/;
  let llama: FakeLlamaServer;
  let claude: FakeAnthropic;
  let gw: TestGateway;
  let client: Anthropic;

  before(async () => {
    llama = await startFakeLlamaServer({ alias: 'qwen-test' });
    claude = await startFakeAnthropic({ apiKey: KEY });
    gw = await startGateway(`
backends:
  local: { type: llamacpp, base_url: "${llama.url}" }
  claude: { type: anthropic, base_url: "${claude.url}", api_key: "${KEY}" }
routing:
  retry: { max_retries: 0 }
  breaker: { consecutive_failures: 0, min_requests: 100000 }
models:
  local: { targets: [ { backend: local, model: qwen-test } ] }
  claude: { targets: [ { backend: claude, model: claude-sonnet-4-5 } ] }
`);
    client = new Anthropic({ baseURL: gw.url, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await gw.close();
    await llama.close();
    await claude.close();
  });

  const postTo = (g: TestGateway, body: unknown): Promise<Response> =>
    fetch(`${g.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body: JSON.stringify(body) });

  /** A turn of the llama backend with reasoning, streamed through the SDK: its raw events and final message. */
  async function thinkingTurn(): Promise<{ events: Anthropic.MessageStreamEvent[]; message: Anthropic.Message }> {
    const stream = client.messages.stream({ model: 'local', max_tokens: 64, messages: [{ role: 'user', content: 'think: the sky' }] });
    const events: Anthropic.MessageStreamEvent[] = [];
    for await (const ev of stream) events.push(ev);
    return { events, message: await stream.finalMessage() };
  }

  test("stream through the SDK: the thinking block's signature is the gateway's, sent as a signature_delta right before its content_block_stop", async () => {
    const { events, message } = await thinkingTurn();
    const thinking = message.content[0];
    assert.ok(thinking?.type === 'thinking', JSON.stringify(message.content));
    assert.equal(thinking.thinking, 'thinking about the sky');
    assert.match(thinking.signature, SIG);
    assert.deepEqual(message.content.map((b) => b.type), ['thinking', 'text']);
    const stop = events.findIndex((e) => e.type === 'content_block_stop' && e.index === 0);
    assert.ok(stop > 0);
    assert.deepEqual(events[stop - 1], { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: thinking.signature } });
    const signatureDeltas = events.filter((e) => e.type === 'content_block_delta' && e.delta.type === 'signature_delta');
    assert.equal(signatureDeltas.length, 1);
  });

  test('JSON: the thinking block carries the same signature as the stream gives for the same text', async () => {
    const { message: streamed } = await thinkingTurn();
    const m = await client.messages.create({ model: 'local', max_tokens: 64, messages: [{ role: 'user', content: 'think: the sky' }] });
    const thinking = m.content[0];
    assert.ok(thinking?.type === 'thinking', JSON.stringify(m.content));
    assert.match(thinking.signature, SIG);
    assert.deepEqual(thinking, streamed.content[0]);
  });

  /** History: an Anthropic-made turn (signed thinking, redacted thinking), then the gateway's thinking turn. */
  async function history(): Promise<{ theirs: Anthropic.MessageParam; messages: Anthropic.MessageParam[] }> {
    const { message } = await thinkingTurn();
    const theirs: Anthropic.MessageParam = {
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: 'Anthropic thought.', signature: 'EqQBCkYIBxgCKkBsig+/=' },
        { type: 'redacted_thinking', data: 'EmwKAhgBEgy3va3pzix/LafPsn4a' },
        { type: 'text', text: 'first answer' },
      ],
    };
    const messages: Anthropic.MessageParam[] = [
      { role: 'user', content: 'first question' },
      theirs,
      { role: 'user', content: 'think: the sky' },
      { role: 'assistant', content: message.content },
      { role: 'user', content: 'and now?' },
    ];
    return { theirs, messages };
  }

  test('history to a native anthropic target: gateway-signed thinking is left out with a warning; Anthropic-signed and redacted thinking arrive unchanged', async () => {
    const { theirs, messages } = await history();
    claude.reset();
    const { data: m, response } = await client.messages.create({ model: 'claude', max_tokens: 64, messages }).withResponse();
    assert.equal(response.status, 200);
    assert.equal(m.content[0]?.type === 'text' && m.content[0].text, 'echo: and now?');
    assert.match(response.headers.get('x-switchyard-warnings') ?? '', /1 thinking block\(s\) signed by the gateway or unsigned left out/);
    const sent = claude.requests.at(-1);
    assert.ok(sent && isRecord(sent.body));
    const upMessages = sent.body.messages as Json[];
    assert.equal(upMessages.length, 5);
    assert.deepEqual(upMessages[1], theirs);
    assert.deepEqual(upMessages[3], { role: 'assistant', content: (messages[3]?.content as unknown as Json[]).filter((b) => b.type !== 'thinking') });
    assert.equal((upMessages[3]?.content as Json[]).length, 1);
    assert.ok(!sent.raw.includes('swy1.'));

    // streamed the same way
    claude.reset();
    const res = await postTo(gw, { model: 'claude', max_tokens: 64, stream: true, messages });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('x-switchyard-warnings') ?? '', /signed by the gateway or unsigned left out/);
    assert.equal(parseSse(await res.text()).at(-1)?.event, 'message_stop');
    assert.ok(!(claude.requests.at(-1)?.raw ?? 'swy1.').includes('swy1.'));
  });

  test('history to a native target with no gateway-signed block: sent as the client wrote it, no warning', async () => {
    const { messages } = await history();
    const clean = messages.slice(0, 2).concat([{ role: 'user', content: 'again' }]);
    claude.reset();
    const body = { model: 'claude', max_tokens: 64, messages: clean };
    const res = await postTo(gw, body);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-switchyard-warnings'), null);
    assert.equal(claude.requests.at(-1)?.raw, JSON.stringify({ ...body, model: 'claude-sonnet-4-5' }));
  });

  test('history to a translated (llama-server) target: the gateway-signed block goes on as reasoning_content', async () => {
    const { messages } = await history();
    const { response } = await client.messages.create({ model: 'local', max_tokens: 64, messages }).withResponse();
    assert.equal(response.status, 200);
    assert.doesNotMatch(response.headers.get('x-switchyard-warnings') ?? '', /signed by the gateway/);
    const up = llama.requests.filter((r) => r.path === '/v1/chat/completions').at(-1);
    assert.ok(up && isRecord(up.body));
    const assistant = (up.body.messages as Json[]).filter((m) => m.role === 'assistant');
    assert.equal(assistant[1]?.reasoning_content, 'thinking about the sky');
  });
});
