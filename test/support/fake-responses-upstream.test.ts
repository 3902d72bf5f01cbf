import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { startFakeResponses, type FakeResponsesUpstream } from './fake-responses-upstream.ts';

const API_KEY = 'sk-test-responses';

async function post(url: string, body: unknown): Promise<{ status: number; json: { error: { message: string; type: string; param: string | null; code: string | null } } }> {
  const r = await fetch(`${url}/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as never };
}

describe('fake Responses upstream', () => {
  let up: FakeResponsesUpstream;
  let client: OpenAI;

  before(async () => {
    up = await startFakeResponses({ apiKey: API_KEY });
    client = new OpenAI({ baseURL: up.url, apiKey: API_KEY, maxRetries: 0 });
  });
  afterEach(() => up.reset());
  after(async () => {
    await up.close();
  });

  test('responses.create: the Response object, output_text from the SDK, the request recorded', async () => {
    const res = await client.responses.create({ model: 'gpt-5-mini', input: 'hi there', instructions: 'Be brief.', metadata: { a: 'b' } });
    assert.match(res.id, /^resp_[0-9a-f]{48}$/);
    assert.equal(res.object, 'response');
    assert.equal(res.status, 'completed');
    assert.equal(res.model, 'gpt-5-mini');
    assert.equal(res.output_text, 'Hello from gpt-5-mini');
    assert.equal(res.instructions, 'Be brief.');
    assert.deepEqual(res.metadata, { a: 'b' });
    assert.equal(res.error, null);
    const msg = res.output[0];
    assert.ok(msg?.type === 'message');
    assert.deepEqual(msg.content, [{ type: 'output_text', annotations: [], logprobs: [], text: 'Hello from gpt-5-mini' }]);
    assert.ok(res.usage);
    assert.equal(res.usage.total_tokens, res.usage.input_tokens + res.usage.output_tokens);
    assert.equal(up.requests.length, 1);
    assert.equal(up.requests[0]?.path, '/v1/responses');
    assert.deepEqual(up.requests[0]?.body, { model: 'gpt-5-mini', input: 'hi there', instructions: 'Be brief.', metadata: { a: 'b' } });
  });

  test('responses.stream: OpenAI event order with event: lines, final response equal to the completed event', async () => {
    up.enqueue({ kind: 'stream', text: 'one two three', reasoning: 'thinking' });
    const stream = client.responses.stream({ model: 'gpt-5', input: 'count' });
    const events: ResponseStreamEvent[] = [];
    for await (const e of stream) events.push(e);
    const final = await stream.finalResponse();
    assert.deepEqual(events.map((e) => e.type), [
      'response.created', 'response.in_progress',
      'response.output_item.added', 'response.reasoning_summary_part.added', 'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.done', 'response.reasoning_summary_part.done', 'response.output_item.done',
      'response.output_item.added', 'response.content_part.added',
      'response.output_text.delta', 'response.output_text.delta', 'response.output_text.delta',
      'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed',
    ]);
    events.forEach((e, i) => assert.equal(e.sequence_number, i));
    assert.equal(final.output_text, 'one two three');
    const completed = events[events.length - 1];
    assert.ok(completed?.type === 'response.completed');
    // The SDK's final response is the completed event's (plus its own `parsed` fields).
    assert.deepEqual(final.output.map((o) => o.id), completed.response.output.map((o) => o.id));
    assert.equal(final.id, completed.response.id);
    assert.equal(final.usage?.output_tokens_details.reasoning_tokens, 1);
  });

  test('raw SSE framing: event and data lines, no [DONE]', async () => {
    const r = await fetch(`${up.url}/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ model: 'm', input: 'x', stream: true }),
    });
    assert.match(r.headers.get('content-type') ?? '', /^text\/event-stream/);
    const text = await r.text();
    assert.ok(text.startsWith('event: response.created\ndata: {"type":"response.created","sequence_number":0,'), text.slice(0, 80));
    assert.ok(text.endsWith('\n\n'));
    assert.equal(text.includes('[DONE]'), false);
  });

  test('a function tool round trip by previous_response_id, then by explicit items', async () => {
    const tools: OpenAI.Responses.Tool[] = [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false }];
    const first = await client.responses.create({ model: 'm', input: 'What is the weather in Paris?', tools });
    const call = first.output[0];
    assert.ok(call?.type === 'function_call');
    assert.equal(call.name, 'get_weather');
    assert.equal(call.arguments, '{"city":"Paris"}');
    assert.match(call.call_id, /^call_/);
    assert.match(call.id ?? '', /^fc_/);

    const second = await client.responses.create({ model: 'm', previous_response_id: first.id, input: [{ type: 'function_call_output', call_id: call.call_id, output: 'sunny' }], tools });
    assert.equal(second.output_text, 'Result: sunny');
    assert.equal(second.previous_response_id, first.id);

    // The same without stored state: the call item sent back explicitly.
    const third = await client.responses.create({
      model: 'm',
      store: false,
      input: [{ role: 'user', content: 'weather?' }, call, { type: 'function_call_output', call_id: call.call_id, output: 'rain' }],
      tools,
    });
    assert.equal(third.output_text, 'Result: rain');
    assert.equal(up.stored.has(third.id), false, 'store: false is not stored');

    const items = await client.responses.inputItems.list(second.id);
    assert.equal(items.data.length, 2);
    assert.deepEqual((await client.responses.retrieve(first.id)).id, first.id);
    await client.responses.delete(first.id);
    await assert.rejects(client.responses.retrieve(first.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
  });

  test('a streamed tool call: function_call_arguments deltas and done', async () => {
    up.enqueue({ kind: 'stream', toolCalls: [{ name: 'lookup', arguments: '{"q":"abc"}', callId: 'call_1' }, { name: 'apply_patch', arguments: 'diff', custom: true }] });
    const stream = client.responses.stream({ model: 'm', input: 'x' });
    const types: string[] = [];
    for await (const e of stream) types.push(e.type);
    const final = await stream.finalResponse();
    assert.deepEqual(types.slice(2, 8), ['response.output_item.added', 'response.function_call_arguments.delta', 'response.function_call_arguments.delta', 'response.function_call_arguments.delta', 'response.function_call_arguments.done', 'response.output_item.done']);
    assert.ok(types.includes('response.custom_tool_call_input.done'));
    assert.deepEqual(final.output.map((o) => o.type), ['function_call', 'custom_tool_call']);
  });

  test('rejects what OpenAI rejects, with its envelope', async () => {
    const cases: Array<[unknown, number, string | null, string | null, RegExp]> = [
      [{ input: 'x' }, 400, 'model', 'missing_required_parameter', /Missing required parameter: 'model'/],
      [{ model: 5, input: 'x' }, 400, 'model', 'invalid_type', /expected a string, but got an integer/],
      [{ model: 'm' }, 400, 'input', 'missing_required_parameter', /'input'/],
      [{ model: 'm', input: 7 }, 400, 'input', 'invalid_type', /Invalid type for 'input'/],
      [{ model: 'm', input: [{ role: 'bot', content: 'x' }] }, 400, 'input[0].role', 'invalid_value', /Invalid value: 'bot'\. Supported values are: 'assistant', 'system', 'developer', and 'user'\./],
      [{ model: 'm', input: [{ type: 'function_call_output', call_id: 'call_x', output: 'y' }] }, 400, 'input', null, /No tool call found for function call output with call_id call_x/],
      [{ model: 'm', input: 'x', previous_response_id: 'resp_nope' }, 400, 'previous_response_id', 'previous_response_not_found', /not found/],
      [{ model: 'm', input: 'x', temperature: 3 }, 400, 'temperature', 'decimal_above_max_value', /<= 2/],
      [{ model: 'm', input: 'x', tools: [{ type: 'function' }] }, 400, 'tools[0].name', 'missing_required_parameter', /tools\[0\]\.name/],
    ];
    for (const [body, status, param, code, message] of cases) {
      const r = await post(up.url, body);
      assert.equal(r.status, status, JSON.stringify(body));
      assert.equal(r.json.error.type, 'invalid_request_error');
      assert.equal(r.json.error.param, param, JSON.stringify(body));
      assert.equal(r.json.error.code, code, JSON.stringify(body));
      assert.match(r.json.error.message, message);
    }
    assert.equal((await post(up.url, '{nope')).status, 400);
    const noKey = await fetch(`${up.url}/responses`, { method: 'POST', body: '{}' });
    assert.equal(noKey.status, 401);
    const wrong = await fetch(`${up.url}/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${API_KEY}` }, body: '{}' });
    assert.equal(wrong.status, 404);
  });

  test('scripted 429 with retry-after and 500: the SDK sees them; validation does not consume the queue', async () => {
    up.enqueue({ kind: 'error', status: 429, message: 'Rate limit reached', headers: { 'retry-after': '2' } }, { kind: 'error', status: 500 });
    assert.equal((await post(up.url, { input: 'x' })).status, 400);
    await assert.rejects(client.responses.create({ model: 'm', input: 'x' }), (e: unknown) => e instanceof OpenAI.RateLimitError && e.headers.get('retry-after') === '2' && e.code === 'rate_limit_exceeded');
    await assert.rejects(client.responses.create({ model: 'm', input: 'x' }), (e: unknown) => e instanceof OpenAI.InternalServerError);
    assert.equal((await client.responses.create({ model: 'm', input: 'x' })).status, 'completed');
  });

  test('a drop mid-stream: the SDK gets an error after the first deltas, no completed event', async () => {
    up.enqueue({ kind: 'stream', text: 'a b c d', dropAfter: 2 });
    const stream = client.responses.stream({ model: 'm', input: 'x' });
    const seen: string[] = [];
    await assert.rejects(
      (async () => {
        for await (const e of stream) seen.push(e.type);
      })(),
    );
    assert.equal(seen.filter((t) => t === 'response.output_text.delta').length, 2);
    assert.equal(seen.includes('response.completed'), false);
  });

  test('failAfter → response.failed; errorAfter → an error event; noCompleted → stream ends early', async () => {
    up.enqueue({ kind: 'stream', text: 'a b c', failAfter: { after: 1, message: 'boom' } });
    const s1 = client.responses.stream({ model: 'm', input: 'x' });
    const t1: ResponseStreamEvent[] = [];
    for await (const e of s1) t1.push(e);
    const failed = t1[t1.length - 1];
    assert.ok(failed?.type === 'response.failed');
    assert.deepEqual(failed.response.error, { code: 'server_error', message: 'boom' });
    assert.equal(failed.sequence_number, t1.length - 1);

    up.enqueue({ kind: 'stream', text: 'a b c', errorAfter: { after: 1, message: 'cut' } });
    const t2: ResponseStreamEvent[] = [];
    for await (const e of client.responses.stream({ model: 'm', input: 'x' })) t2.push(e);
    assert.deepEqual(t2[t2.length - 1], { type: 'error', sequence_number: t2.length - 1, code: 'server_error', message: 'cut', param: null });

    up.enqueue({ kind: 'stream', noCompleted: true });
    const t3: string[] = [];
    for await (const e of client.responses.stream({ model: 'm', input: 'x' })) t3.push(e.type);
    assert.equal(t3[t3.length - 1], 'response.output_item.done');
  });

  test('hang: the client times out and the abort is seen', async () => {
    up.enqueue({ kind: 'hang' });
    const quick = new OpenAI({ baseURL: up.url, apiKey: API_KEY, maxRetries: 0, timeout: 200 });
    await assert.rejects(quick.responses.create({ model: 'm', input: 'x' }), (e: unknown) => e instanceof OpenAI.APIConnectionTimeoutError);
    await up.waitForClientAbort();
    assert.equal(up.clientAborts, 1);
  });

  test('onModel rules win over the queue; incomplete answers', async () => {
    up.onModel('short', { kind: 'reply', text: 'Once upon', incomplete: true });
    const res = await client.responses.create({ model: 'short', input: 'story', max_output_tokens: 16 });
    assert.equal(res.status, 'incomplete');
    assert.deepEqual(res.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(res.output_text, 'Once upon');
  });
});
