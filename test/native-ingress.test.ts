/**
 * /v1/responses and /v1/messages reaching backends that speak them natively — the client's body
 * with only `model` replaced, the answer's events forwarded as they came — and failing over
 * between native and translated targets before the first content event, through the real SDKs.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic-upstream.ts';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';
import { startFakeResponses, type FakeResponsesUpstream } from './support/fake-responses-upstream.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';

type Json = Record<string, unknown>;

describe('native ingress: Responses and Messages passed through, failover across native and translated', () => {
  let resp: FakeResponsesUpstream;
  let chat: FakeUpstream;
  let claude: FakeAnthropic;
  let gw: TestGateway;
  let openai: OpenAI;
  let anthropic: Anthropic;

  before(async () => {
    resp = await startFakeResponses();
    chat = await startFakeOpenAI();
    claude = await startFakeAnthropic();
    gw = await startGateway(`
routing: { retry: { max_retries: 0 }, breaker: { consecutive_failures: 0, min_requests: 1000000 } }
cache: { enabled: true }
backends:
  oai: { type: openai, base_url: "${resp.url}", api_key: sk-up, responses: true }
  chat: { type: openai, base_url: "${chat.url}", api_key: sk-up }
  claude: { type: anthropic, base_url: "${claude.url}", api_key: sk-ant-up }
models:
  native-first: { targets: [ { backend: oai, model: gpt-up }, { backend: chat, model: chat-up } ] }
  translated-first: { targets: [ { backend: chat, model: chat-up }, { backend: oai, model: gpt-up } ] }
  claude-first: { targets: [ { backend: claude, model: claude-up }, { backend: chat, model: chat-up } ] }
`);
    openai = new OpenAI({ baseURL: gw.baseURL, apiKey: 'unused', maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: gw.url, apiKey: 'unused', maxRetries: 0 });
  });

  after(async () => {
    await gw?.close();
    await resp?.close();
    await chat?.close();
    await claude?.close();
  });

  const lastBody = (reqs: ReadonlyArray<{ body: unknown }>): Json => reqs.at(-1)?.body as Json;

  test('Responses JSON: the body reaches the native upstream with only model replaced; its answer comes back', async () => {
    resp.reset();
    const body = {
      model: 'native-first',
      input: 'hi there',
      include: ['reasoning.encrypted_content'],
      tools: [{ type: 'web_search' }],
      store: false,
      x_vendor_extra: { keep: [1, null, 'x'] },
    };
    const r = await fetch(`${gw.baseURL}/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-switchyard-backend'), 'oai');
    assert.equal(r.headers.get('x-switchyard-warnings'), null, 'nothing was dropped: web_search went to a backend that runs it');
    const answer = (await r.json()) as Json;
    assert.deepEqual(lastBody(resp.requests), { ...body, model: 'gpt-up' });
    assert.equal(answer.object, 'response');
    assert.equal(answer.model, 'gpt-up', 'a native answer is the upstream’s');
    assert.equal(chat.requests.length, 0);
  });

  test('Responses stream through the openai SDK: events forwarded from the native upstream', async () => {
    resp.reset();
    const stream = openai.responses.stream({ model: 'native-first', input: 'stream please', store: false });
    const types: string[] = [];
    for await (const ev of stream) types.push(ev.type);
    const final = await stream.finalResponse();
    assert.equal(final.output_text, 'Hello from gpt-up');
    assert.equal(types[0], 'response.created');
    assert.equal(types.at(-1), 'response.completed');
    assert.equal((lastBody(resp.requests) as { stream?: unknown }).stream, true);
    const line = gw.logs.map((l) => JSON.parse(l) as Json).findLast((l) => l.route === '/v1/responses');
    assert.equal(line?.backend, 'oai');
    assert.equal(typeof line?.prompt_tokens, 'number', 'usage was read from response.completed on the way');
  });

  test('previous_response_id with a native backend: the gateway expands the conversation from its own store', async () => {
    resp.reset();
    const first = await openai.responses.create({ model: 'native-first', input: 'my name is Ada' });
    assert.ok(resp.stored.has(first.id), 'the id the client holds is the upstream’s');
    const second = await openai.responses.create({ model: 'native-first', input: 'what is my name?', previous_response_id: first.id });
    assert.equal(second.status, 'completed');
    assert.equal(second.previous_response_id, first.id, 'the answer names the id the client sent');
    assert.equal((await openai.responses.retrieve(second.id)).previous_response_id, first.id, 'and so does the stored response');
    const sent = lastBody(resp.requests);
    assert.equal(sent.previous_response_id, undefined, 'not passed through: any target can continue');
    const input = sent.input as Json[];
    assert.equal(input[0]?.role, 'user');
    assert.equal(input[0]?.content, 'my name is Ada');
    assert.equal(input.at(-1)?.content, 'what is my name?');
    assert.ok(input.some((i) => i.type === 'message' && i.role === 'assistant'), 'the first answer is in the history');
  });

  test('item_reference with a native backend: the gateway writes the stored item into the body it sends', async () => {
    resp.reset();
    chat.reset();
    // one item stored from a native answer (the upstream's id), one from a translated answer (the gateway's)
    const native = await openai.responses.create({ model: 'native-first', input: 'first question' });
    const translated = await openai.responses.create({ model: 'translated-first', input: 'second question' });
    const nativeItem = native.output[0];
    const translatedItem = translated.output[0];
    assert.ok(nativeItem?.type === 'message' && translatedItem?.type === 'message');
    const [question] = (await openai.responses.inputItems.list(translated.id)).data;
    assert.ok(question?.type === 'message' && question.id);
    const r = await openai.responses.create({
      model: 'native-first',
      store: false,
      input: [
        { type: 'item_reference', id: nativeItem.id },
        { type: 'item_reference', id: question.id },
        { type: 'item_reference', id: translatedItem.id },
        { role: 'user', content: 'and now?' },
      ],
    });
    assert.equal(r.status, 'completed');
    const sent = lastBody(resp.requests).input as Json[];
    assert.equal(sent.length, 4);
    assert.deepEqual(sent[0], nativeItem as unknown as Json);
    assert.deepEqual(sent[1], { type: 'message', role: 'user', status: 'completed', content: [{ type: 'input_text', text: 'second question' }] }, 'an input message goes without the id the gateway gave it');
    assert.deepEqual(sent[2], translatedItem as unknown as Json);
    assert.equal((sent[2]?.content as Json[])[0]?.text, 'Hello from chat-up');
    assert.ok(!sent.some((i) => i.type === 'item_reference'), 'no reference reaches the upstream');
    const unknown = await fetch(`${gw.baseURL}/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'native-first', input: [{ type: 'item_reference', id: 'msg_unknown' }] }),
    });
    assert.equal(unknown.status, 404);
    assert.deepEqual(await unknown.json(), { error: { message: "Item with id 'msg_unknown' not found.", type: 'invalid_request_error', param: 'input', code: null } });
    assert.equal(resp.requests.length, 2, 'the unknown reference never reached the upstream');
  });

  test('Responses failover before content: a native 503 is served by the translated target, and back', async () => {
    resp.reset();
    chat.reset();
    resp.enqueue({ kind: 'error', status: 503, message: 'overloaded' });
    const a = await openai.responses.create({ model: 'native-first', input: 'hello', store: false });
    assert.equal(a.output_text, 'Hello from chat-up');
    chat.enqueue({ kind: 'error', status: 500, message: 'boom' });
    const s = openai.responses.stream({ model: 'translated-first', input: 'hello', store: false });
    const b = await s.finalResponse();
    assert.equal(b.output_text, 'Hello from gpt-up');
  });

  test('Responses stream: a native stream cut after content ends with an error event, not a clean end', async () => {
    resp.reset();
    resp.enqueue({ kind: 'stream', chunks: ['one ', 'two ', 'three'], dropAfter: 2 });
    const r = await fetch(`${gw.baseURL}/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'native-first', input: 'x', stream: true, store: false }),
    });
    const text = await r.text();
    assert.equal(r.status, 200);
    assert.match(text, /event: response\.output_text\.delta/);
    assert.match(text, /event: error\ndata: \{"type":"error"/);
    assert.doesNotMatch(text, /response\.completed/);
  });

  test('Messages JSON through the Anthropic SDK: the body byte for byte but model, betas passed', async () => {
    claude.reset();
    const msg = await anthropic.messages.create(
      {
        model: 'claude-first',
        max_tokens: 64,
        system: [{ type: 'text', text: 'be brief', cache_control: { type: 'ephemeral' } }],
        messages: [{ role: 'user', content: 'hello' }],
      },
      { headers: { 'anthropic-beta': 'context-management-2025-06-27', 'anthropic-version': '2023-06-01' } },
    );
    assert.equal(msg.type, 'message');
    const rec = claude.requests.at(-1);
    assert.ok(rec);
    const sent = JSON.parse(rec.raw) as Json;
    assert.equal(sent.model, 'claude-up');
    assert.deepEqual((sent.system as Json[])[0], { type: 'text', text: 'be brief', cache_control: { type: 'ephemeral' } });
    assert.equal(rec.headers['anthropic-beta'], 'context-management-2025-06-27');
    assert.equal(rec.headers['x-api-key'], 'sk-ant-up');
  });

  test('Messages stream: the native events reach the client exactly as the upstream wrote them', async () => {
    claude.reset();
    const events = [
      { event: 'message_start', data: { type: 'message_start', message: { id: 'msg_x', type: 'message', role: 'assistant', model: 'claude-up', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 7, output_tokens: 1 } } } },
      { event: 'content_block_start', data: { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } } },
      { event: 'ping', data: { type: 'ping' } },
      { event: 'content_block_delta', data: { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } } },
      { event: 'content_block_stop', data: { type: 'content_block_stop', index: 0 } },
      { event: 'message_delta', data: { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 2 } } },
      { event: 'message_stop', data: { type: 'message_stop' } },
    ];
    claude.enqueue({ kind: 'events', events });
    const r = await fetch(`${gw.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'claude-first', max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(r.status, 200);
    const expected = events.map((e) => `event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`).join('');
    assert.equal(await r.text(), expected);
    const line = gw.logs.map((l) => JSON.parse(l) as Json).findLast((l) => l.route === '/v1/messages');
    assert.equal(line?.prompt_tokens, 7);
    assert.equal(line?.completion_tokens, 2);
  });

  test('count_tokens: the native upstream counts; when it fails, the gateway estimates (and says which)', async () => {
    claude.reset();
    const counted = await anthropic.messages.countTokens({ model: 'claude-first', messages: [{ role: 'user', content: 'one two three' }] });
    assert.equal(counted.input_tokens, 1013, 'the fake upstream’s own count');
    assert.equal(claude.requests.at(-1)?.path, '/v1/messages/count_tokens');
    assert.equal((claude.requests.at(-1)?.body as Json).model, 'claude-up');
    claude.enqueue({ kind: 'error', status: 500, type: 'api_error', message: 'down' });
    const r = await fetch(`${gw.url}/v1/messages/count_tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'claude-first', messages: [{ role: 'user', content: 'one two three' }] }),
    });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-switchyard-count'), 'estimate');
    const n = ((await r.json()) as { input_tokens: number }).input_tokens;
    assert.ok(n > 0 && n < 1000, `an estimate, not the upstream's count: ${n}`);
  });

  test('the response cache and coalescing serve event streams too (native Messages, store:false Responses)', async () => {
    claude.reset();
    const events = [
      { event: 'message_start', data: { type: 'message_start', message: { id: 'msg_c', type: 'message', role: 'assistant', model: 'claude-up', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 3, output_tokens: 1 } } } },
      { event: 'content_block_start', data: { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } } },
      { event: 'content_block_delta', data: { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'cached' } } },
      { event: 'content_block_stop', data: { type: 'content_block_stop', index: 0 } },
      { event: 'message_delta', data: { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 1 } } },
      { event: 'message_stop', data: { type: 'message_stop' } },
    ];
    claude.enqueue({ kind: 'events', events });
    const ask = (): Promise<Response> =>
      fetch(`${gw.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model: 'claude-first', max_tokens: 16, temperature: 0, stream: true, messages: [{ role: 'user', content: 'cache me' }] }),
      });
    const a = await ask();
    const first = await a.text();
    assert.equal(a.headers.get('x-switchyard-cache'), 'miss');
    const b = await ask();
    assert.equal(b.headers.get('x-switchyard-cache'), 'hit');
    assert.equal(await b.text(), first, 'the cached stream replays the same events');
    assert.equal(claude.requests.length, 1);

    resp.reset();
    const body = JSON.stringify({ model: 'native-first', input: 'cache me too', temperature: 0, store: false });
    const post = (): Promise<Response> => fetch(`${gw.baseURL}/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const [x, y] = await Promise.all([post(), post()]);
    assert.deepEqual([x.status, y.status], [200, 200]);
    assert.deepEqual(await x.json(), await y.json());
    assert.equal(resp.requests.length, 1, 'two identical requests in flight share one upstream call');
    const stored = await post();
    assert.equal(stored.headers.get('x-switchyard-cache'), 'hit');
  });

  test('Messages failover before content: an Anthropic 529 is served translated by the chat target', async () => {
    claude.reset();
    chat.reset();
    claude.enqueue({ kind: 'error', status: 529, type: 'overloaded_error', message: 'Overloaded' });
    const stream = anthropic.messages.stream({ model: 'claude-first', max_tokens: 32, messages: [{ role: 'user', content: 'hello' }] });
    const final = await stream.finalMessage();
    assert.equal(final.content[0]?.type, 'text');
    assert.equal(final.content[0]?.type === 'text' ? final.content[0].text : '', 'Hello from chat-up');
    assert.equal(final.model, 'claude-first', 'a translated answer names the public model');
    assert.equal(chat.requests.length, 1);
  });
});
