/**
 * End to end for `/v1/responses` through the real clients, unchanged but for their base URL: the
 * openai SDK (`responses.create`, `.stream`, `.parse` with zod, retrieve / input_items / delete,
 * function-tool round trips), the Vercel AI SDK's default OpenAI provider (which calls the
 * Responses API) and LangChain's `ChatOpenAI` with `useResponsesApi`. The gateway translates to
 * chat and the upstream is the OpenAI-compatible chat fake.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI, { NotFoundError, BadRequestError } from 'openai';
import { zodTextFormat } from 'openai/helpers/zod';
import type { FunctionTool, ResponseInputItem } from 'openai/resources/responses/responses';
import { z } from 'zod';
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { ChatOpenAI } from '@langchain/openai';
import type { RecordedRequest } from './support/fake-openai-upstream.ts';
import { upstreamsWithGateway } from './support/suite.ts';

const UPSTREAM_KEY = 'sk-test-upstream-secret';
const KEY_A = 'sk-gw-team-a-123';
const KEY_B = 'sk-gw-team-b-456';

type Json = Record<string, unknown>;
const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

const WEATHER: FunctionTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather for a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
  strict: true,
};

function chatBodies(reqs: RecordedRequest[]): Json[] {
  return reqs.filter((r) => r.path === '/v1/chat/completions').map((r) => {
    assert.ok(isRecord(r.body));
    return r.body;
  });
}

async function rejection(p: PromiseLike<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  return assert.fail('expected the call to fail');
}

describe('e2e: clients of the Responses API → Switchyard → chat upstream', () => {
  const ctx = upstreamsWithGateway({
    upstreams: { fake: { apiKey: UPSTREAM_KEY } },
    yaml: ({ fake }) => `
routing: { retry: { max_retries: 0 } }
backends:
  up: { type: openai, base_url: "${fake.url}", api_key: "${UPSTREAM_KEY}" }
models:
  gpt-test: { targets: [ { backend: up, model: upstream-model } ] }
keys:
  - { name: team-a, key: "${KEY_A}" }
  - { name: team-b, key: "${KEY_B}" }
`,
    extras: ({ gw }) => ({
      client: new OpenAI({ baseURL: gw.baseURL, apiKey: KEY_A, maxRetries: 0 }),
      other: new OpenAI({ baseURL: gw.baseURL, apiKey: KEY_B, maxRetries: 0 }),
    }),
    reset: 'beforeEach',
  });

  describe('openai SDK', () => {
    test('responses.create: output_text, usage, the public model name', async () => {
      const r = await ctx.client.responses.create({ model: 'gpt-test', instructions: 'Be brief.', input: 'Say hello' });
      assert.equal(r.output_text, 'Hello from upstream-model');
      assert.equal(r.model, 'gpt-test');
      assert.equal(r.status, 'completed');
      assert.equal(r.usage?.output_tokens, 3);
      assert.equal(r.usage?.total_tokens, (r.usage?.input_tokens ?? 0) + 3);
    });

    test('responses.stream: text deltas as events and the final response', async () => {
      const stream = ctx.client.responses.stream({ model: 'gpt-test', input: 'Say hello' });
      const deltas: string[] = [];
      const types: string[] = [];
      stream.on('response.output_text.delta', (e) => deltas.push(e.delta));
      for await (const e of stream) types.push(e.type);
      const final = await stream.finalResponse();
      assert.equal(deltas.join(''), 'Hello from upstream-model');
      assert.equal(types[0], 'response.created');
      assert.equal(types.at(-1), 'response.completed');
      assert.equal(final.output_text, 'Hello from upstream-model');
      assert.equal(final.status, 'completed');
      assert.equal(final.usage?.output_tokens, 3);
    });

    test('responses.parse with a zod schema: json_schema reaches the upstream, output_parsed comes back', async () => {
      const Person = z.object({ name: z.string(), age: z.number() });
      ctx.fake.enqueue({ kind: 'reply', content: '{"name":"Ada","age":36}' });
      const r = await ctx.client.responses.parse({ model: 'gpt-test', input: 'Who?', text: { format: zodTextFormat(Person, 'person') } });
      assert.deepEqual(r.output_parsed, { name: 'Ada', age: 36 });
      const [sent] = chatBodies(ctx.fake.requests);
      const rf = sent?.response_format as Json;
      assert.equal(rf.type, 'json_schema');
      assert.equal((rf.json_schema as Json).name, 'person');
      assert.equal((rf.json_schema as Json).strict, true);
    });

    test('function tool round trip by previous_response_id', async () => {
      const first = await ctx.client.responses.create({ model: 'gpt-test', input: 'What is the weather in Paris?', tools: [WEATHER] });
      const call = first.output.find((o) => o.type === 'function_call');
      assert.ok(call && call.type === 'function_call');
      assert.equal(call.name, 'get_weather');
      assert.deepEqual(JSON.parse(call.arguments), { city: 'Paris' });
      const second = await ctx.client.responses.create({
        model: 'gpt-test',
        previous_response_id: first.id,
        input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"temp_c":18}' }],
        tools: [WEATHER],
      });
      assert.equal(second.output_text, 'Hello from upstream-model');
      const sent = chatBodies(ctx.fake.requests)[1];
      const messages = sent?.messages as Json[];
      assert.deepEqual(
        messages.map((m) => m.role),
        ['user', 'assistant', 'tool'],
      );
      const calls = messages[1]?.tool_calls as Json[];
      assert.equal(calls[0]?.id, call.call_id);
      assert.deepEqual(messages[2], { role: 'tool', tool_call_id: call.call_id, content: '{"temp_c":18}' });
    });

    test('function tool round trip by explicit function_call_output items, store: false', async () => {
      const input: ResponseInputItem[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
      const first = await ctx.client.responses.create({ model: 'gpt-test', input, tools: [WEATHER], store: false });
      const call = first.output.find((o) => o.type === 'function_call');
      assert.ok(call && call.type === 'function_call');
      input.push(call, { type: 'function_call_output', call_id: call.call_id, output: '{"temp_c":18}' });
      const second = await ctx.client.responses.create({ model: 'gpt-test', input, tools: [WEATHER], store: false });
      assert.equal(second.output_text, 'Hello from upstream-model');
      const messages = chatBodies(ctx.fake.requests)[1]?.messages as Json[];
      assert.deepEqual(
        messages.map((m) => m.role),
        ['user', 'assistant', 'tool'],
      );
      assert.equal(((messages[1]?.tool_calls as Json[])[0]?.function as Json).name, 'get_weather');
    });

    test('function tool round trip by item_reference (no previous_response_id); another key gets NotFoundError', async () => {
      const first = await ctx.client.responses.create({ model: 'gpt-test', input: 'What is the weather in Paris?', tools: [WEATHER] });
      const call = first.output.find((o) => o.type === 'function_call');
      assert.ok(call && call.type === 'function_call' && call.id);
      const input: ResponseInputItem[] = [
        { type: 'item_reference', id: call.id },
        { type: 'function_call_output', call_id: call.call_id, output: '{"temp_c":18}' },
      ];
      const second = await ctx.client.responses.create({ model: 'gpt-test', input, tools: [WEATHER], store: false });
      assert.equal(second.output_text, 'Hello from upstream-model');
      const messages = chatBodies(ctx.fake.requests)[1]?.messages as Json[];
      assert.deepEqual(messages, [
        { role: 'assistant', content: null, tool_calls: [{ id: call.call_id, type: 'function', function: { name: 'get_weather', arguments: call.arguments } }] },
        { role: 'tool', tool_call_id: call.call_id, content: '{"temp_c":18}' },
      ]);
      const theirs = await rejection(ctx.other.responses.create({ model: 'gpt-test', input, tools: [WEATHER] }));
      assert.ok(theirs instanceof NotFoundError, String(theirs));
      assert.equal(theirs.param, 'input');
      assert.equal(theirs.message, `404 Item with id '${call.id}' not found.`);
      assert.equal(chatBodies(ctx.fake.requests).length, 2, 'refused before any upstream call');
    });

    test('retrieve, input_items.list and delete; another key gets NotFoundError', async () => {
      const r = await ctx.client.responses.create({ model: 'gpt-test', input: [{ role: 'user', content: 'first' }, { role: 'user', content: 'second' }] });
      const got = await ctx.client.responses.retrieve(r.id);
      assert.equal(got.id, r.id);
      assert.equal(got.output_text, r.output_text);
      const items = [];
      for await (const item of ctx.client.responses.inputItems.list(r.id, { order: 'asc' })) items.push(item);
      assert.deepEqual(
        items.map((i) => (i.type === 'message' ? i.content.map((c) => (c.type === 'input_text' ? c.text : '')).join('') : i.type)),
        ['first', 'second'],
      );
      const theirs = await rejection(ctx.other.responses.retrieve(r.id));
      assert.ok(theirs instanceof NotFoundError, String(theirs));
      const prev = await rejection(ctx.other.responses.create({ model: 'gpt-test', input: 'x', previous_response_id: r.id }));
      assert.ok(prev instanceof BadRequestError, String(prev));
      assert.equal(prev.code, 'previous_response_not_found');
      assert.equal(prev.param, 'previous_response_id');
      await ctx.client.responses.delete(r.id);
      const gone = await rejection(ctx.client.responses.retrieve(r.id));
      assert.ok(gone instanceof NotFoundError, String(gone));
    });
  });

  describe('Vercel AI SDK (default OpenAI provider: the Responses API)', () => {
    const provider = () => createOpenAI({ baseURL: ctx.gw.baseURL, apiKey: KEY_A });

    test('generateText', async () => {
      const r = await generateText({ model: provider()('gpt-test'), prompt: 'Say hello', maxRetries: 0 });
      assert.equal(r.text, 'Hello from upstream-model');
      assert.equal(r.usage.outputTokens, 3);
      assert.equal(r.finishReason, 'stop');
      assert.ok(ctx.fake.requests.some((q) => q.path === '/v1/chat/completions'));
    });

    test('streamText with a tool: the call, its result, and the answer after it', async () => {
      const r = streamText({
        model: provider()('gpt-test'),
        prompt: 'What is the weather in Paris?',
        tools: {
          get_weather: tool({
            description: 'Current weather for a city',
            inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
            execute: async ({ city }) => ({ city, temp_c: 18 }),
          }),
        },
        stopWhen: stepCountIs(3),
        maxRetries: 0,
      });
      let text = '';
      for await (const t of r.textStream) text += t;
      const steps = await r.steps;
      assert.equal(steps[0]?.toolCalls[0]?.toolName, 'get_weather');
      assert.deepEqual(steps[0]?.toolCalls[0]?.input, { city: 'Paris' });
      assert.equal(text, 'Hello from upstream-model');
      const messages = chatBodies(ctx.fake.requests)[1]?.messages as Json[];
      assert.deepEqual(
        messages.map((m) => m.role),
        ['user', 'assistant', 'tool'],
      );
    });

    test('generateObject', async () => {
      ctx.fake.enqueue({ kind: 'reply', content: '{"name":"Ada","age":36}' });
      const r = await generateObject({ model: provider()('gpt-test'), schema: z.object({ name: z.string(), age: z.number() }), prompt: 'Who?', maxRetries: 0 });
      assert.deepEqual(r.object, { name: 'Ada', age: 36 });
      const rf = chatBodies(ctx.fake.requests)[0]?.response_format as Json;
      assert.equal(rf.type, 'json_schema');
    });
  });

  describe('LangChain ChatOpenAI with useResponsesApi', () => {
    const chat = () => new ChatOpenAI({ model: 'gpt-test', apiKey: KEY_A, maxRetries: 0, useResponsesApi: true, configuration: { baseURL: ctx.gw.baseURL } });

    test('invoke and stream', async () => {
      const msg = await chat().invoke('Say hello');
      assert.equal(msg.text, 'Hello from upstream-model');
      assert.equal(msg.usage_metadata?.output_tokens, 3);
      let streamed = '';
      for await (const c of await chat().stream('Say hello')) streamed += c.text;
      assert.equal(streamed, 'Hello from upstream-model');
      assert.ok(ctx.fake.requests.length >= 2);
    });

    test('tools: the model’s call comes back as a tool call', async () => {
      const model = chat().bindTools([{ type: 'function', function: { name: 'get_weather', description: 'Current weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }]);
      const msg = await model.invoke('What is the weather in Paris?');
      assert.equal(msg.tool_calls?.[0]?.name, 'get_weather');
      assert.deepEqual(msg.tool_calls?.[0]?.args, { city: 'Paris' });
    });
  });
});
