/**
 * The Anthropic translation functions on recorded shapes: OpenAI requests → Messages requests,
 * Messages responses → chat completions, and Messages stream events → chunks.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { GatewayError } from '../../errors/gateway-error.ts';
import { chatRequestSchema, type ChatCompletionChunk, type ChatRequest } from '../../protocol/chat/schema.ts';
import { anthropicMessageSchema, toChatCompletion, toFinishReason, toOpenAIUsage } from './response.ts';
import { toChatChunks } from './stream.ts';
import { JSON_OBJECT_INSTRUCTION, toAnthropicRequest, type TranslateOptions } from './translate.ts';

const NEW: TranslateOptions = { defaultMaxTokens: 4096, anthropicVersion: '2026-10-21' };
const OLD: TranslateOptions = { defaultMaxTokens: 4096, anthropicVersion: '2023-06-01' };

const req = (body: Record<string, unknown>): ChatRequest => chatRequestSchema.parse({ model: 'claude-x', ...body });
const user = (content: unknown): Record<string, unknown> => ({ role: 'user', content });

function gatewayError(fn: () => unknown): GatewayError {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof GatewayError, `expected a GatewayError, got ${String(e)}`);
    return e;
  }
  return assert.fail('expected an error');
}

describe('toAnthropicRequest', () => {
  test('system and developer messages go to the top-level system, same-role turns merge, max_tokens defaults', () => {
    const { body, dropped } = toAnthropicRequest(
      req({
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'developer', content: [{ type: 'text', text: 'Answer in French.' }] },
          user('Hello'),
          user([{ type: 'text', text: 'And again' }]),
          { role: 'assistant', content: 'Bonjour' },
          { role: 'system', content: 'Late rule.' },
          user('Bye'),
        ],
      }),
      NEW,
    );
    assert.deepEqual(dropped, []);
    assert.equal(body.max_tokens, 4096);
    assert.deepEqual(body.system, [
      { type: 'text', text: 'Be brief.' },
      { type: 'text', text: 'Answer in French.' },
      { type: 'text', text: 'Late rule.' },
    ]);
    assert.deepEqual(body.messages, [
      { role: 'user', content: [{ type: 'text', text: 'Hello' }, { type: 'text', text: 'And again' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Bonjour' }] },
      { role: 'user', content: [{ type: 'text', text: 'Bye' }] },
    ]);
  });

  test('one system message is sent as a string; max_completion_tokens wins over max_tokens', () => {
    const { body } = toAnthropicRequest(req({ messages: [{ role: 'system', content: 'S' }, user('u')], max_tokens: 10, max_completion_tokens: 20 }), NEW);
    assert.equal(body.system, 'S');
    assert.equal(body.max_tokens, 20);
    assert.equal(toAnthropicRequest(req({ messages: [user('u')], max_tokens: 10 }), NEW).body.max_tokens, 10);
  });

  test('temperature/top_p: dropped on 2026-10-21, sent (clamped to 1) on 2023-06-01', () => {
    const r = req({ messages: [user('u')], temperature: 1.5, top_p: 0.9 });
    const n = toAnthropicRequest(r, NEW);
    assert.equal(n.body.temperature, undefined);
    assert.equal(n.body.top_p, undefined);
    assert.deepEqual(n.dropped, ['temperature', 'top_p']);
    const o = toAnthropicRequest(r, OLD);
    assert.equal(o.body.temperature, 1);
    assert.equal(o.body.top_p, 0.9);
    assert.deepEqual(o.dropped, []);
  });

  test('stop → stop_sequences, user → metadata.user_id', () => {
    assert.deepEqual(toAnthropicRequest(req({ messages: [user('u')], stop: 'END' }), NEW).body.stop_sequences, ['END']);
    const { body } = toAnthropicRequest(req({ messages: [user('u')], stop: ['a', 'b'], user: 'u-42' }), NEW);
    assert.deepEqual(body.stop_sequences, ['a', 'b']);
    assert.deepEqual(body.metadata, { user_id: 'u-42' });
  });

  test('tools and every tool_choice form; parallel_tool_calls: false → disable_parallel_tool_use', () => {
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
    const base = { messages: [user('u')], tools };
    const { body } = toAnthropicRequest(req(base), NEW);
    assert.deepEqual(body.tools, [{ name: 'get_weather', description: 'Weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }]);
    assert.equal(body.tool_choice, undefined);
    const choice = (c: unknown, extra: Record<string, unknown> = {}): unknown => toAnthropicRequest(req({ ...base, tool_choice: c, ...extra }), NEW).body.tool_choice;
    assert.deepEqual(choice('auto'), { type: 'auto' });
    assert.deepEqual(choice('none'), { type: 'none' });
    assert.deepEqual(choice('required'), { type: 'any' });
    assert.deepEqual(choice({ type: 'function', function: { name: 'get_weather' } }), { type: 'tool', name: 'get_weather' });
    assert.deepEqual(choice('required', { parallel_tool_calls: false }), { type: 'any', disable_parallel_tool_use: true });
    assert.deepEqual(toAnthropicRequest(req({ ...base, parallel_tool_calls: false }), NEW).body.tool_choice, { type: 'auto', disable_parallel_tool_use: true });
    // A parameter-less tool still gets an object schema.
    const bare = toAnthropicRequest(req({ messages: [user('u')], tools: [{ type: 'function', function: { name: 'now' } }] }), NEW);
    assert.deepEqual(bare.body.tools, [{ name: 'now', input_schema: { type: 'object' } }]);
  });

  test('assistant tool_calls → tool_use; tool messages → tool_result blocks first in one user turn', () => {
    const { body } = toAnthropicRequest(
      req({
        messages: [
          user('weather in Paris and Rome?'),
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
              { id: 'toolu_2', type: 'function', function: { name: 'get_weather', arguments: '' } },
            ],
          },
          { role: 'tool', tool_call_id: 'toolu_1', content: 'sunny' },
          { role: 'tool', tool_call_id: 'toolu_2', content: [{ type: 'text', text: 'rainy' }] },
          user('thanks'),
        ],
      }),
      NEW,
    );
    assert.deepEqual(body.messages, [
      { role: 'user', content: [{ type: 'text', text: 'weather in Paris and Rome?' }] },
      {
        role: 'assistant',
        content: [
          { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
          { type: 'tool_use', id: 'toolu_2', name: 'get_weather', input: {} },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' },
          { type: 'tool_result', tool_use_id: 'toolu_2', content: [{ type: 'text', text: 'rainy' }] },
          { type: 'text', text: 'thanks' },
        ],
      },
    ]);
  });

  test('tool call arguments that are not a JSON object are a 400 naming the field', () => {
    const bad = (args: string): GatewayError =>
      gatewayError(() =>
        toAnthropicRequest(
          req({ messages: [user('u'), { role: 'assistant', tool_calls: [{ id: 't', type: 'function', function: { name: 'f', arguments: args } }] }] }),
          NEW,
        ),
      );
    for (const args of ['{"city":', '[1,2]']) {
      const e = bad(args);
      assert.equal(e.status, 400);
      assert.equal(e.param, 'messages[1].tool_calls[0].function.arguments');
    }
  });

  test('images: data URLs → base64 source, http URLs → url source, other types → 400', () => {
    const { body } = toAnthropicRequest(
      req({
        messages: [
          user([
            { type: 'text', text: 'what is this?' },
            { type: 'image_url', image_url: { url: 'data:image/jpg;base64,/9j/4AAQ' } },
            { type: 'image_url', image_url: { url: 'https://example.com/cat.png', detail: 'high' } },
          ]),
        ],
      }),
      NEW,
    );
    assert.deepEqual(body.messages[0]?.content, [
      { type: 'text', text: 'what is this?' },
      { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: '/9j/4AAQ' } },
      { type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } },
    ]);
    const e = gatewayError(() => toAnthropicRequest(req({ messages: [user([{ type: 'image_url', image_url: { url: 'data:image/bmp;base64,Qk0=' } }])] }), NEW));
    assert.equal(e.status, 400);
    assert.equal(e.param, 'messages[0].content[0].image_url.url');
    assert.match(e.message, /image\/bmp/);
  });

  test('PDF files → document blocks; audio input → 400', () => {
    const { body } = toAnthropicRequest(
      req({ messages: [user([{ type: 'file', file: { file_data: 'data:application/pdf;base64,JVBERi0=', filename: 'a.pdf' } }])] }),
      NEW,
    );
    assert.deepEqual(body.messages[0]?.content, [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' }, title: 'a.pdf' }]);
    const e = gatewayError(() => toAnthropicRequest(req({ messages: [user([{ type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }])] }), NEW));
    assert.equal(e.status, 400);
    assert.equal(e.code, 'unsupported_value');
  });

  test('response_format: json_schema → output_config.format, json_object → a system instruction', () => {
    const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false };
    const s = toAnthropicRequest(req({ messages: [user('u')], response_format: { type: 'json_schema', json_schema: { name: 'x', schema, strict: true } } }), NEW);
    assert.deepEqual(s.body.output_config, { format: { type: 'json_schema', schema } });
    const o = toAnthropicRequest(req({ messages: [{ role: 'system', content: 'S' }, user('u')], response_format: { type: 'json_object' } }), NEW);
    assert.deepEqual(o.body.system, [
      { type: 'text', text: 'S' },
      { type: 'text', text: JSON_OBJECT_INSTRUCTION },
    ]);
    assert.equal(o.body.output_config, undefined);
  });

  test('reasoning_effort → output_config.effort', () => {
    assert.deepEqual(toAnthropicRequest(req({ messages: [user('u')], reasoning_effort: 'minimal' }), NEW).body.output_config, { effort: 'low' });
    assert.deepEqual(toAnthropicRequest(req({ messages: [user('u')], reasoning_effort: 'high' }), NEW).body.output_config, { effort: 'high' });
  });

  test('n > 1, logprobs, top_logprobs, audio output and legacy functions are a 400 unsupported_parameter', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ n: 2 }, 'n'],
      [{ logprobs: true }, 'logprobs'],
      [{ logprobs: true, top_logprobs: 3 }, 'logprobs'],
      [{ top_logprobs: 2 }, 'top_logprobs'],
      [{ audio: { voice: 'alloy', format: 'wav' }, modalities: ['text', 'audio'] }, 'audio'],
      [{ modalities: ['text', 'audio'] }, 'modalities'],
      [{ functions: [{ name: 'f' }] }, 'functions'],
    ];
    for (const [extra, param] of cases) {
      const e = gatewayError(() => toAnthropicRequest(req({ messages: [user('u')], ...extra }), NEW));
      assert.equal(e.status, 400, param);
      assert.equal(e.code, 'unsupported_parameter');
      assert.equal(e.param, param);
      assert.equal(e.retryable, false);
    }
    // no-op values are fine
    const ok = toAnthropicRequest(req({ messages: [user('u')], n: 1, logprobs: false, modalities: ['text'] }), NEW);
    assert.deepEqual(ok.dropped, []);
  });

  test('custom tools and their calls, custom or unknown tool_choice, unknown tool, tool call and response_format types: 400 unsupported_parameter naming the parameter', () => {
    const fn = { type: 'function', function: { name: 'x' } };
    const custom = { type: 'custom', custom: { name: 'code_exec' } };
    const history = (tc: unknown): Record<string, unknown> => ({
      messages: [user('u'), { role: 'assistant', content: null, tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'x', arguments: '{}' } }, tc] }, { role: 'tool', tool_call_id: 'call_1', content: 'r' }],
    });
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ tools: [custom] }, 'tools[0]'],
      [{ tools: [fn, { type: 'custom', custom: { name: 'sql', format: { type: 'grammar', grammar: { definition: 'start: "a"', syntax: 'lark' } } } }] }, 'tools[1]'],
      [{ tools: [{ type: 'custom', custom: { name: 't', format: { type: 'text' } } }] }, 'tools[0]'],
      [{ tools: [{ type: 'web_search_2030' }] }, 'tools[0]'],
      [{ tools: [fn], tool_choice: { type: 'custom', custom: { name: 'x' } } }, 'tool_choice'],
      [{ tools: [fn], tool_choice: { type: 'mcp', server_label: 'a' } }, 'tool_choice'],
      [{ tools: [fn], tool_choice: 'validated' }, 'tool_choice'],
      [{ tools: [fn], tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'none', tools: [fn] } } }, 'tool_choice'],
      [{ tools: [fn], tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [{ type: 'custom', custom: { name: 'x' } }] } } }, 'tool_choice.allowed_tools.tools[0]'],
      [history({ id: 'call_1', type: 'custom', custom: { name: 'code_exec', input: 'print(1)' } }), 'messages[1].tool_calls[1]'],
      [history({ id: 'call_1', type: 'mcp_call', mcp_call: {} }), 'messages[1].tool_calls[1]'],
      [{ response_format: { type: 'grammar', grammar: 'start: "a"' } }, 'response_format'],
    ];
    for (const [extra, param] of cases) {
      const e = gatewayError(() => toAnthropicRequest(req({ messages: [user('u')], ...extra }), NEW));
      assert.deepEqual([e.status, e.type, e.code, e.param, e.retryable], [400, 'invalid_request_error', 'unsupported_parameter', param, false], JSON.stringify(extra));
      assert.match(e.message, new RegExp(`^Unsupported parameter: '${param.replace(/[[\].]/g, '\\$&')}' `));
    }
  });

  test('allowed_tools: only those tools go upstream, mode auto → auto, required → any; an unknown name is a 400', () => {
    const tool = (name: string): Record<string, unknown> => ({ type: 'function', function: { name, parameters: { type: 'object' } } });
    const base = { messages: [user('u')], tools: [tool('a'), tool('b'), tool('c')] };
    const allowed = (mode: string, names: string[]): Record<string, unknown> => ({
      type: 'allowed_tools',
      allowed_tools: { mode, tools: names.map((n) => ({ type: 'function', function: { name: n } })) },
    });
    const auto = toAnthropicRequest(req({ ...base, tool_choice: allowed('auto', ['c', 'a']) }), NEW).body;
    assert.deepEqual(auto.tools?.map((t) => ('name' in t ? t.name : '')), ['a', 'c']);
    assert.deepEqual(auto.tool_choice, { type: 'auto' });
    const required = toAnthropicRequest(req({ ...base, tool_choice: allowed('required', ['b']), parallel_tool_calls: false }), NEW).body;
    assert.deepEqual(required.tools?.map((t) => ('name' in t ? t.name : '')), ['b']);
    assert.deepEqual(required.tool_choice, { type: 'any', disable_parallel_tool_use: true });

    const unknown = gatewayError(() => toAnthropicRequest(req({ ...base, tool_choice: allowed('auto', ['a', 'zzz']) }), NEW));
    assert.deepEqual([unknown.status, unknown.param], [400, 'tool_choice.allowed_tools.tools[1]']);
    assert.match(unknown.message, /"zzz"/);
    const none = gatewayError(() => toAnthropicRequest(req({ ...base, tool_choice: allowed('auto', []) }), NEW));
    assert.deepEqual([none.status, none.param], [400, 'tool_choice.allowed_tools.tools']);
  });

  test('null optionals mean absent: the same Messages request as without them, nothing reported as dropped', () => {
    const tools = [{ type: 'function', function: { name: 'f', description: null, parameters: null, strict: null } }];
    const plain = toAnthropicRequest(req({ messages: [user('u')], tools }), NEW);
    const nulls = Object.fromEntries(
      ['tool_choice', 'parallel_tool_calls', 'response_format', 'user', 'stop', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'seed', 'stream', 'stream_options', 'logprobs', 'top_logprobs', 'n', 'presence_penalty', 'frequency_penalty', 'logit_bias', 'metadata', 'reasoning_effort', 'audio', 'modalities', 'functions', 'function_call'].map((k) => [k, null]),
    );
    const withNulls = toAnthropicRequest(
      req({ messages: [{ ...user('u'), name: null }, { role: 'assistant', content: 'a', tool_calls: null, function_call: null, refusal: null }, user('v')], tools, ...nulls }),
      NEW,
    );
    assert.deepEqual(withNulls.dropped, []);
    assert.deepEqual({ ...withNulls.body, messages: undefined }, { ...plain.body, messages: undefined });
    assert.deepEqual(plain.body.tools, [{ name: 'f', input_schema: { type: 'object' } }]);
    assert.equal(toAnthropicRequest(req({ messages: [user('u')], tools: null }), NEW).body.tools, undefined);
  });

  test('sampling penalties, seed, logit_bias and unknown extras are dropped and reported; no-op values are not', () => {
    const { body, dropped } = toAnthropicRequest(
      req({ messages: [user('u')], logit_bias: { '50256': -100 }, seed: 7, presence_penalty: 0.5, frequency_penalty: 0, store: false, foo: 'bar', metadata: { a: 'b' } }),
      NEW,
    );
    assert.deepEqual(dropped.sort(), ['foo', 'logit_bias', 'metadata', 'presence_penalty', 'seed']);
    assert.equal('seed' in body, false);
    assert.equal('foo' in body, false);
  });

  test('a request with nothing but system messages is a 400', () => {
    const e = gatewayError(() => toAnthropicRequest(req({ messages: [{ role: 'system', content: 'S' }] }), NEW));
    assert.equal(e.status, 400);
    assert.equal(e.param, 'messages');
  });
});

// Recorded from the Messages API (ids shortened).
const RECORDED_TEXT = {
  id: 'msg_01XFDUDYJgAACzvnptvVoYEL',
  type: 'message',
  role: 'assistant',
  model: 'claude-sonnet-4-6',
  content: [{ type: 'text', text: 'Hello!', citations: null }],
  stop_reason: 'end_turn',
  stop_sequence: null,
  stop_details: null,
  container: null,
  usage: { input_tokens: 12, cache_creation_input_tokens: 100, cache_read_input_tokens: 2000, output_tokens: 6, service_tier: 'standard' },
};

describe('toChatCompletion', () => {
  test('text, usage with cache tokens folded into prompt_tokens', () => {
    const c = toChatCompletion(anthropicMessageSchema.parse(RECORDED_TEXT), 1700000000);
    assert.equal(c.id, RECORDED_TEXT.id);
    assert.equal(c.object, 'chat.completion');
    assert.equal(c.model, 'claude-sonnet-4-6');
    assert.deepEqual(c.choices, [{ index: 0, message: { role: 'assistant', content: 'Hello!', refusal: null }, logprobs: null, finish_reason: 'stop' }]);
    assert.deepEqual(c.usage, {
      prompt_tokens: 2112,
      completion_tokens: 6,
      total_tokens: 2118,
      prompt_tokens_details: { cached_tokens: 2000, cache_creation_tokens: 100 },
    });
  });

  test('tool_use blocks → tool_calls with ids kept and arguments as JSON strings; thinking → reasoning_content', () => {
    const msg = {
      ...RECORDED_TEXT,
      content: [
        { type: 'thinking', thinking: 'Need the weather.', signature: 'EqQB' },
        { type: 'tool_use', id: 'toolu_01A09q90qw90lq917835lq9', name: 'get_weather', input: { location: 'San Francisco, CA', unit: 'celsius' }, caller: { type: 'direct' } },
        { type: 'tool_use', id: 'toolu_02', name: 'get_time', input: {} },
      ],
      stop_reason: 'tool_use',
      usage: { input_tokens: 10, output_tokens: 20, cache_creation_input_tokens: null, cache_read_input_tokens: null, output_tokens_details: { thinking_tokens: 5 } },
    };
    const c = toChatCompletion(anthropicMessageSchema.parse(msg), 1);
    const choice = c.choices[0];
    assert.ok(choice);
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, null);
    assert.deepEqual(choice.message.tool_calls, [
      { id: 'toolu_01A09q90qw90lq917835lq9', type: 'function', function: { name: 'get_weather', arguments: '{"location":"San Francisco, CA","unit":"celsius"}' } },
      { id: 'toolu_02', type: 'function', function: { name: 'get_time', arguments: '{}' } },
    ]);
    assert.equal((choice.message as { reasoning_content?: string }).reasoning_content, 'Need the weather.');
    assert.deepEqual(c.usage?.completion_tokens_details, { reasoning_tokens: 5 });
    assert.equal(c.usage?.prompt_tokens, 10);
  });

  test('stop_reason → finish_reason', () => {
    const table: Array<[string | null, string]> = [
      ['end_turn', 'stop'],
      ['stop_sequence', 'stop'],
      ['pause_turn', 'stop'],
      ['max_tokens', 'length'],
      ['model_context_window_exceeded', 'length'],
      ['tool_use', 'tool_calls'],
      ['refusal', 'content_filter'],
      [null, 'stop'],
      ['something_new', 'stop'],
    ];
    for (const [stop, finish] of table) assert.equal(toFinishReason(stop), finish, String(stop));
  });

  test('usage without cache fields', () => {
    assert.deepEqual(toOpenAIUsage({ input_tokens: 3, output_tokens: 4 }), {
      prompt_tokens: 3,
      completion_tokens: 4,
      total_tokens: 7,
      prompt_tokens_details: { cached_tokens: 0, cache_creation_tokens: 0 },
    });
  });
});

async function* from(events: unknown[]): AsyncGenerator<unknown> {
  for (const e of events) yield e;
}

async function collect(events: unknown[], includeUsage = true): Promise<ChatCompletionChunk[]> {
  const out: ChatCompletionChunk[] = [];
  for await (const c of toChatChunks(from(events), { backend: 'claude', secrets: ['sk-ant-secret-123'], includeUsage, now: () => 1_700_000_000_000 })) out.push(c);
  return out;
}

const deltas = (chunks: ChatCompletionChunk[]): unknown[] => chunks.map((c) => (c.choices[0] ? c.choices[0].delta : { usage: c.usage }));

// The streaming example from the Messages API docs: text, then a tool_use with input_json_delta.
const START = {
  type: 'message_start',
  message: {
    id: 'msg_014p7gG3wDgGV9EUtLvnow3U',
    type: 'message',
    role: 'assistant',
    model: 'claude-sonnet-4-6',
    stop_sequence: null,
    usage: { input_tokens: 472, output_tokens: 2, cache_creation_input_tokens: 0, cache_read_input_tokens: 30 },
    content: [],
    stop_reason: null,
  },
};
const RECORDED_TOOL_STREAM = [
  START,
  { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
  { type: 'ping' },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Okay' } },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: ', checking.' } },
  { type: 'content_block_stop', index: 0 },
  { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6', name: 'get_weather', input: {} } },
  { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '' } },
  { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"location":' } },
  { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: ' "San Francisco, CA"}' } },
  { type: 'content_block_stop', index: 1 },
  { type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: 'toolu_02', name: 'get_time', input: {} } },
  { type: 'content_block_stop', index: 2 },
  { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 89 } },
  { type: 'message_stop' },
];

describe('toChatChunks', () => {
  test('text + tool calls: role first, tool calls with index/id/name first then argument fragments, finish, usage', async () => {
    const chunks = await collect(RECORDED_TOOL_STREAM);
    assert.ok(chunks.every((c) => c.id === 'msg_014p7gG3wDgGV9EUtLvnow3U' && c.object === 'chat.completion.chunk' && c.created === 1_700_000_000));
    assert.deepEqual(deltas(chunks), [
      { role: 'assistant', content: '' },
      { content: 'Okay' },
      { content: ', checking.' },
      { tool_calls: [{ index: 0, id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6', type: 'function', function: { name: 'get_weather', arguments: '' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{"location":' } }] },
      { tool_calls: [{ index: 0, function: { arguments: ' "San Francisco, CA"}' } }] },
      { tool_calls: [{ index: 1, id: 'toolu_02', type: 'function', function: { name: 'get_time', arguments: '' } }] },
      { tool_calls: [{ index: 1, function: { arguments: '{}' } }] },
      {},
      { usage: { prompt_tokens: 502, completion_tokens: 89, total_tokens: 591, prompt_tokens_details: { cached_tokens: 30, cache_creation_tokens: 0 } } },
    ]);
    const finish = chunks[chunks.length - 2];
    assert.equal(finish?.choices[0]?.finish_reason, 'tool_calls');
    assert.deepEqual(chunks[chunks.length - 1]?.choices, []);
    assert.ok(chunks.slice(0, -2).every((c) => c.choices[0]?.finish_reason === null));
  });

  test('without include_usage there is no usage chunk; thinking streams as reasoning_content', async () => {
    const chunks = await collect(
      [
        START,
        { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } },
        { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'Let me think' } },
        { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'EqQB' } },
        { type: 'content_block_stop', index: 0 },
        { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } },
        { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: '42' } },
        { type: 'content_block_stop', index: 1 },
        { type: 'message_delta', delta: { stop_reason: 'max_tokens', stop_sequence: null }, usage: { output_tokens: 9 } },
        { type: 'some_future_event', foo: 1 },
        { type: 'message_stop' },
      ],
      false,
    );
    assert.deepEqual(deltas(chunks), [{ role: 'assistant', content: '' }, { reasoning_content: 'Let me think' }, { content: '42' }, {}]);
    assert.equal(chunks[3]?.choices[0]?.finish_reason, 'length');
  });

  test('an error event mid-stream throws after the chunks before it (overloaded → 503, others → 502), redacted', async () => {
    const run = async (type: string, message: string): Promise<{ got: ChatCompletionChunk[]; err: unknown }> => {
      const got: ChatCompletionChunk[] = [];
      try {
        for await (const c of toChatChunks(
          from([
            START,
            { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
            { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } },
            { type: 'error', error: { type, message } },
            { type: 'message_stop' },
          ]),
          { backend: 'claude', secrets: ['sk-ant-secret-123'], includeUsage: true },
        )) {
          got.push(c);
        }
      } catch (e) {
        return { got, err: e };
      }
      return { got, err: undefined };
    };
    const o = await run('overloaded_error', 'Overloaded');
    assert.equal(o.got.length, 2);
    assert.ok(o.err instanceof GatewayError);
    assert.equal(o.err.status, 503);
    assert.equal(o.err.retryable, true);
    assert.match(o.err.message, /Overloaded/);
    const a = await run('api_error', 'boom with key sk-ant-secret-123');
    assert.ok(a.err instanceof GatewayError);
    assert.equal(a.err.status, 502);
    assert.equal(a.err.code, 'upstream_stream_error');
    assert.doesNotMatch(a.err.message, /sk-ant-secret-123/);
  });

  test('a stream cut before message_stop ends without a finish_reason', async () => {
    const chunks = await collect(RECORDED_TOOL_STREAM.slice(0, 5));
    assert.ok(chunks.every((c) => c.choices.every((ch) => ch.finish_reason === null)));
  });

  test('events before message_start are a malformed upstream', async () => {
    await assert.rejects(collect([{ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'x' } }]), (e: unknown) => {
      assert.ok(e instanceof GatewayError);
      assert.equal(e.code, 'upstream_malformed_response');
      return true;
    });
  });
});
