/**
 * End to end through the real clients for translated streams, with text that JSON, URL and SSE
 * escaping would each change: quotes, backslashes, newlines, `%41`, non-ASCII and an emoji, in the
 * first token of a message as well as later ones.
 *
 * - `POST /v1/responses` with `stream: true` to a chat upstream (a `type: openai` backend without
 *   `responses: true`): the openai SDK (`responses.stream` with a zod text format, `create` with
 *   `stream: true`, `retrieve`), the Vercel AI SDK's Responses provider (`streamObject`, a
 *   multi-step `streamText` with a tool) and LangChain's `ChatOpenAI` with `useResponsesApi`. The
 *   text the clients see, the stored response and what the upstream is sent next are byte-exact.
 * - `POST /v1/messages` with `stream: true` to the same chat upstream: `message_start` carries the
 *   gateway's prompt estimate (> 0), `message_delta` the upstream's exact usage, as the Anthropic
 *   SDK and LangChain's `ChatAnthropic` read them.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodTextFormat } from 'openai/helpers/zod';
import type { Response as OpenAIResponse } from 'openai/resources/responses/responses';
import Anthropic from '@anthropic-ai/sdk';
import { z } from 'zod';
import { createOpenAI } from '@ai-sdk/openai';
import { jsonSchema, stepCountIs, streamObject, streamText, tool } from 'ai';
import { ChatOpenAI } from '@langchain/openai';
import { ChatAnthropic } from '@langchain/anthropic';
import { HumanMessage, type AIMessageChunk } from '@langchain/core/messages';
import type { RecordedRequest } from './support/fake-openai-upstream.ts';
import { upstreamsWithGateway } from './support/suite.ts';

const UPSTREAM_KEY = 'sk-test-upstream-translation';
const KEY = 'sk-gw-translation-clients-1';

type Json = Record<string, unknown>;
const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** String values a JSON, URL or SSE escape would each change; the first one opens the answer's first token. */
const RECORD = {
  title: '50%41 off: "quoted" \\ back\\slash\nnew line \u2014 na\u00efve caf\u00e9 \u2615 \u{1F600}',
  path: 'C:\\Users\\%41dmin\\"q"\\n',
  note: 'tab\there, %E2%82%AC, data: [DONE]\n\nend',
  tags: ['"a"', 'b\\c', '%25', '\u{1F680}\u00e9'],
  count: 3,
};
const RecordSchema = z.object({ title: z.string(), path: z.string(), note: z.string(), tags: z.array(z.string()), count: z.number() });
/** The model's answer: the record as JSON text. */
const RECORD_TEXT = JSON.stringify(RECORD);
/** Token boundaries: the first token holds quotes, escaped backslashes and newlines, `%41`, non-ASCII and the emoji. */
const RECORD_CHUNKS = splitAt(RECORD_TEXT, RECORD_TEXT.indexOf('"path"'), RECORD_TEXT.indexOf('"tags"'));

/** Plain text answers, tokens as the upstream streams them. */
const TEXT_CHUNKS = ['"50%41" off\\\n\u2615\u{1F600} ', 'na\u00efve caf\u00e9 \u2014 \t', ' %E2%82%AC "end"\n'];
const TEXT = TEXT_CHUNKS.join('');

const PROMPT = 'Quote this: "50%41" \\ caf\u00e9 \u{1F600}\nthanks';

function splitAt(s: string, ...at: number[]): string[] {
  const cuts = [0, ...at, s.length];
  const out: string[] = [];
  for (let i = 0; i + 1 < cuts.length; i++) out.push(s.slice(cuts[i], cuts[i + 1]));
  assert.equal(out.join(''), s);
  assert.ok(out.every((p) => p !== ''));
  return out;
}

function chatBodies(reqs: RecordedRequest[]): Json[] {
  return reqs
    .filter((r) => r.path === '/v1/chat/completions')
    .map((r) => {
      assert.ok(isRecord(r.body));
      return r.body;
    });
}

/** The output_text of a Response's message items, joined (as the SDK's `output_text`). */
function outputText(r: OpenAIResponse): string {
  let text = '';
  for (const item of r.output) {
    if (item.type !== 'message') continue;
    for (const c of item.content) if (c.type === 'output_text') text += c.text;
  }
  return text;
}

function chunkText(c: AIMessageChunk): string {
  if (typeof c.content === 'string') return c.content;
  let s = '';
  for (const p of c.content) if (isRecord(p) && p.type === 'text' && typeof p.text === 'string') s += p.text;
  return s;
}

describe('e2e: translated streams through the real clients (issue 33)', () => {
  const ctx = upstreamsWithGateway({
    upstreams: { fake: { apiKey: UPSTREAM_KEY } },
    yaml: ({ fake }) => `
routing: { retry: { max_retries: 0 } }
backends:
  up: { type: openai, base_url: "${fake.url}", api_key: "${UPSTREAM_KEY}" }
  echo: { type: fake }
models:
  gpt-test: { targets: [ { backend: up, model: upstream-model } ] }
  echo-test: { targets: [ { backend: echo, model: echo } ] }
  claude-gw: { targets: [ { backend: up, model: upstream-model } ] }
keys:
  - { name: team-a, key: "${KEY}" }
`,
    extras: ({ gw }) => ({
      openai: new OpenAI({ baseURL: gw.baseURL, apiKey: KEY, maxRetries: 0 }),
      anthropic: new Anthropic({ baseURL: gw.url, apiKey: KEY, maxRetries: 0 }),
    }),
    reset: 'beforeEach',
  });

  describe('Responses stream → chat upstream: text byte-exact (issue 33.1)', () => {
    test('openai SDK responses.stream with zodTextFormat: output_parsed and output_text exact', async () => {
      ctx.fake.enqueue({ kind: 'stream', chunks: RECORD_CHUNKS });
      const stream = ctx.openai.responses.stream({ model: 'gpt-test', input: PROMPT, text: { format: zodTextFormat(RecordSchema, 'record') } });
      let deltas = '';
      stream.on('response.output_text.delta', (e) => {
        deltas += e.delta;
      });
      const final = await stream.finalResponse();
      assert.equal(deltas, RECORD_TEXT);
      assert.equal(final.output_text, RECORD_TEXT);
      assert.deepEqual(final.output_parsed, RECORD);
      const rf = chatBodies(ctx.fake.requests)[0]?.response_format;
      assert.ok(isRecord(rf) && rf.type === 'json_schema', 'the format reached the upstream as json_schema');
    });

    test('openai SDK responses.create stream: deltas, output_text.done, response.completed and retrieve exact', async () => {
      ctx.fake.enqueue({ kind: 'stream', chunks: TEXT_CHUNKS });
      const events = await ctx.openai.responses.create({ model: 'gpt-test', input: PROMPT, stream: true });
      const deltas: string[] = [];
      const done: string[] = [];
      let completed: OpenAIResponse | undefined;
      for await (const e of events) {
        if (e.type === 'response.output_text.delta') deltas.push(e.delta);
        else if (e.type === 'response.output_text.done') done.push(e.text);
        else if (e.type === 'response.completed') completed = e.response;
      }
      assert.deepEqual(deltas, TEXT_CHUNKS, 'one delta per upstream token, each as sent');
      assert.deepEqual(done, [TEXT]);
      assert.ok(completed, 'response.completed arrived');
      assert.equal(outputText(completed), TEXT);
      const stored = await ctx.openai.responses.retrieve(completed.id);
      assert.equal(stored.output_text, TEXT);
      assert.equal(outputText(stored), TEXT);
    });

    test('openai SDK responses.create stream to a `type: fake` backend: the echo exact in events and store', async () => {
      // the fake's first token is always "echo: ": PROMPT's characters arrive in later tokens
      const expected = `echo: ${PROMPT}`;
      let deltas = '';
      let completed: OpenAIResponse | undefined;
      for await (const e of await ctx.openai.responses.create({ model: 'echo-test', input: PROMPT, stream: true })) {
        if (e.type === 'response.output_text.delta') deltas += e.delta;
        else if (e.type === 'response.completed') completed = e.response;
      }
      assert.equal(deltas, expected);
      assert.ok(completed, 'response.completed arrived');
      assert.equal(outputText(completed), expected);
      assert.equal((await ctx.openai.responses.retrieve(completed.id)).output_text, expected);
    });

    test('AI SDK streamObject (Responses provider): the object exact', async () => {
      ctx.fake.enqueue({ kind: 'stream', chunks: RECORD_CHUNKS });
      const model = createOpenAI({ baseURL: ctx.gw.baseURL, apiKey: KEY }).responses('gpt-test');
      const errors: unknown[] = [];
      const r = streamObject({ model, schema: RecordSchema, prompt: PROMPT, maxRetries: 0, onError: ({ error }) => void errors.push(error) });
      for await (const _partial of r.partialObjectStream) {
        // drained: the object settles once the stream is read
      }
      assert.deepEqual(await r.object, RECORD);
      assert.deepEqual(errors, []);
      assert.ok(chatBodies(ctx.fake.requests).length === 1, 'translated to one chat request');
    });

    test('AI SDK multi-step streamText with a tool: the next request carries the text and tool output byte-exact', async () => {
      const step1 = ['Let me look "that" up\\\n', '50%41 \u2615\u{1F600} '];
      const step2 = ['Found: "C:\\\\x"\n', '%41 na\u00efve \u{1F680}'];
      const args = '{"query":"50%41 \\"off\\" \\\\ caf\u00e9\\n"}';
      const toolOutput = 'line 1: "quoted" \\ back\\slash\nline 2: 50%41 \u{1F600}';
      ctx.fake.enqueue(
        { kind: 'stream', chunks: step1, toolCalls: [{ id: 'call_lookup0001', name: 'lookup', arguments: args }] },
        { kind: 'stream', chunks: step2 },
      );
      const inputs: unknown[] = [];
      const sentToGateway: unknown[] = [];
      const recording: typeof fetch = async (url, init) => {
        if (typeof init?.body === 'string') sentToGateway.push(JSON.parse(init.body));
        return fetch(url, init);
      };
      const r = streamText({
        model: createOpenAI({ baseURL: ctx.gw.baseURL, apiKey: KEY, fetch: recording }).responses('gpt-test'),
        prompt: PROMPT,
        tools: {
          lookup: tool({
            description: 'Looks a query up',
            inputSchema: jsonSchema<{ query: string }>({ type: 'object', properties: { query: { type: 'string' } }, required: ['query'] }),
            execute: async (input) => {
              inputs.push(input);
              return toolOutput;
            },
          }),
        },
        stopWhen: stepCountIs(3),
        maxRetries: 0,
      });
      let streamed = '';
      for await (const t of r.textStream) streamed += t;
      const steps = await r.steps;
      assert.deepEqual(inputs, [{ query: '50%41 "off" \\ caf\u00e9\n' }]);
      assert.equal(steps.length, 2);
      assert.equal(steps[0]?.text, step1.join(''));
      assert.equal(steps[1]?.text, step2.join(''));
      assert.equal(await r.text, step2.join(''));
      assert.equal(streamed, step1.join('') + step2.join(''));

      // the first step's message goes back as an item_reference: the gateway answers it from its store
      const second = sentToGateway[1];
      assert.ok(isRecord(second) && Array.isArray(second.input));
      assert.ok(second.input.some((i) => isRecord(i) && i.type === 'item_reference'), JSON.stringify(second.input));

      const sent = chatBodies(ctx.fake.requests);
      assert.equal(sent.length, 2);
      const messages = sent[1]?.messages;
      assert.ok(Array.isArray(messages));
      const msgs = messages.filter(isRecord);
      const assistantText = msgs
        .filter((m) => m.role === 'assistant')
        .map((m) => (typeof m.content === 'string' ? m.content : Array.isArray(m.content) ? m.content.map((p) => (isRecord(p) && typeof p.text === 'string' ? p.text : '')).join('') : ''))
        .join('');
      assert.equal(assistantText, step1.join(''), 'the first step’s text goes back to the upstream as it came');
      const calls = msgs.flatMap((m) => (m.role === 'assistant' && Array.isArray(m.tool_calls) ? m.tool_calls.filter(isRecord) : []));
      assert.equal(calls.length, 1);
      assert.equal(calls[0]?.id, 'call_lookup0001');
      assert.deepEqual(calls[0]?.function, { name: 'lookup', arguments: args });
      const toolMsgs = msgs.filter((m) => m.role === 'tool');
      assert.deepEqual(toolMsgs, [{ role: 'tool', tool_call_id: 'call_lookup0001', content: toolOutput }]);
    });

    test('LangChain ChatOpenAI (useResponsesApi) stream: the chunks’ text exact', async () => {
      ctx.fake.enqueue({ kind: 'stream', chunks: TEXT_CHUNKS });
      const chat = new ChatOpenAI({ model: 'gpt-test', apiKey: KEY, maxRetries: 0, useResponsesApi: true, configuration: { baseURL: ctx.gw.baseURL } });
      let streamed = '';
      let full: AIMessageChunk | undefined;
      for await (const c of await chat.stream(PROMPT)) {
        streamed += c.text;
        full = full ? full.concat(c) : c;
      }
      assert.equal(streamed, TEXT);
      assert.ok(full);
      assert.equal(full.text, TEXT);
      assert.ok(ctx.fake.requests.some((q) => q.path === '/v1/chat/completions'));
    });
  });

  describe('Messages stream → chat upstream: message_start carries the prompt estimate (issue 33.2)', () => {
    /** The upstream's own usage, distinct from any estimate of the prompt. */
    const USAGE = { prompt_tokens: 777, completion_tokens: 45 };
    /** A generous bound for the estimate of PROMPT (about 25 tokens) plus the message framing. */
    const SANE = 200;

    test('Anthropic SDK messages.stream: message_start.usage.input_tokens > 0; finalMessage has the exact usage', async () => {
      ctx.fake.enqueue({ kind: 'reply', content: TEXT, usage: USAGE });
      const stream = ctx.anthropic.messages.stream({ model: 'claude-gw', max_tokens: 256, messages: [{ role: 'user', content: PROMPT }] });
      // read at once: the SDK's final message is message_start's object, updated in place by message_delta
      const starts: number[] = [];
      stream.on('streamEvent', (e) => {
        if (e.type === 'message_start') starts.push(e.message.usage.input_tokens);
      });
      let text = '';
      stream.on('text', (t) => {
        text += t;
      });
      const m = await stream.finalMessage();
      assert.equal(text, TEXT);
      assert.equal(starts.length, 1);
      const estimate = starts[0] ?? 0;
      assert.ok(estimate > 0 && estimate < SANE, `message_start input_tokens: ${estimate}`);
      assert.equal(m.usage.input_tokens, USAGE.prompt_tokens);
      assert.equal(m.usage.output_tokens, USAGE.completion_tokens);
      assert.deepEqual(
        m.content.map((b) => (b.type === 'text' ? b.text : b.type)),
        [TEXT],
      );
    });

    test('LangChain ChatAnthropic.stream: usage_metadata.input_tokens > 0, output_tokens the upstream’s', async () => {
      ctx.fake.enqueue({ kind: 'reply', content: TEXT, usage: USAGE });
      const model = new ChatAnthropic({ model: 'claude-gw', anthropicApiUrl: ctx.gw.url, apiKey: KEY, maxRetries: 0, maxTokens: 256 });
      let full: AIMessageChunk | undefined;
      for await (const c of await model.stream([new HumanMessage(PROMPT)])) full = full ? full.concat(c) : c;
      assert.ok(full);
      assert.equal(chunkText(full), TEXT);
      const u = full.usage_metadata;
      assert.ok(u, 'usage_metadata is filled');
      assert.ok(u.input_tokens > 0 && u.input_tokens < SANE, `input_tokens: ${u.input_tokens}`);
      assert.equal(u.output_tokens, USAGE.completion_tokens);
      assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
    });
  });
});
