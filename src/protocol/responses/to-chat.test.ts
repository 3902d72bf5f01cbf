import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../../errors/gateway-error.ts';
import { chatRequestSchema, type ChatCompletion } from '../chat/schema.ts';
import { parseResponsesRequest } from './schema.ts';
import { fromChat } from './from-chat.ts';
import { flatName, responsesName } from './names.ts';
import { toChat, type ToChatOptions } from './to-chat.ts';

function translate(body: Record<string, unknown>, opts?: ToChatOptions) {
  const r = toChat(parseResponsesRequest({ model: 'm', ...body }), opts);
  // Whatever comes out is a valid canonical chat request.
  const check = chatRequestSchema.safeParse(r.chat);
  assert.ok(check.success, JSON.stringify(check.error?.issues));
  return r;
}

function refused(body: Record<string, unknown>, opts?: ToChatOptions): GatewayError {
  try {
    toChat(parseResponsesRequest({ model: 'm', ...body }), opts);
  } catch (err) {
    assert.ok(err instanceof GatewayError, String(err));
    return err;
  }
  assert.fail('expected a refusal');
}

describe('toChat: messages', () => {
  it('instructions → system, string input → user, stream → include_usage', () => {
    const { chat, warnings } = translate({ instructions: 'Be brief.', input: 'hi', stream: true });
    assert.deepEqual(chat, {
      model: 'm',
      messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    assert.deepEqual(warnings, []);
  });

  it('message items of every role and part, developer as system', () => {
    const { chat } = translate({
      input: [
        { role: 'developer', content: [{ type: 'input_text', text: 'rule 1' }, { type: 'input_text', text: 'rule 2' }] },
        { type: 'message', role: 'system', content: 'sys' },
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: 'look' },
            { type: 'input_image', image_url: 'https://x/y.png', detail: 'low' },
            { type: 'input_image', image_url: 'data:image/png;base64,AAAA', detail: 'original' },
            { type: 'input_file', file_data: 'data:application/pdf;base64,AA', filename: 'a.pdf' },
          ],
        },
        { type: 'message', role: 'assistant', id: 'msg_1', status: 'completed', content: [{ type: 'output_text', text: 'Hi', annotations: [] }, { type: 'output_text', text: '!', annotations: [] }] },
        { type: 'message', role: 'assistant', content: [{ type: 'refusal', refusal: 'No.' }] },
      ],
    });
    assert.deepEqual(chat.messages, [
      { role: 'system', content: 'rule 1\nrule 2' },
      { role: 'system', content: 'sys' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look' },
          { type: 'image_url', image_url: { url: 'https://x/y.png', detail: 'low' } },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
          { type: 'file', file: { file_data: 'data:application/pdf;base64,AA', filename: 'a.pdf' } },
        ],
      },
      { role: 'assistant', content: 'Hi!' },
      { role: 'assistant', content: 'No.' },
    ]);
  });

  it('an image by file_id, a tool output image and an unknown part are refused naming the part', () => {
    let e = refused({ input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file-1', detail: 'auto' }] }] });
    assert.equal(e.status, 400);
    assert.equal(e.code, 'unsupported_value');
    assert.equal(e.param, 'input[0].content[0].file_id');
    e = refused({ input: [{ type: 'function_call_output', call_id: 'c', output: [{ type: 'input_image', image_url: 'https://x' }] }] });
    assert.equal(e.param, 'input[0].output[0]');
    e = refused({ input: [{ role: 'user', content: [{ type: 'input_video', url: 'x' }] }] });
    assert.equal(e.param, 'input[0].content[0].type');
  });

  it('no input at all → 400 missing input', () => {
    const e = refused({ instructions: 'only this' });
    assert.equal(e.param, 'input');
    assert.equal(e.code, 'missing_required_parameter');
  });
});

describe('toChat: tool calls and outputs', () => {
  it('function_call items merge into one assistant message (after its text), outputs become tool messages', () => {
    const { chat } = translate({
      input: [
        { role: 'user', content: 'weather in Paris and Rome?' },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Checking.', annotations: [] }] },
        { type: 'function_call', id: 'fc_1', status: 'completed', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call', call_id: 'call_2', name: 'get_weather', arguments: '{"city":"Rome"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'sunny' },
        { type: 'function_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: 'rain' }, { type: 'input_text', text: '12C' }] },
        { type: 'function_call', call_id: 'call_3', name: 'get_time', arguments: '{}' },
      ],
    });
    assert.deepEqual(chat.messages, [
      { role: 'user', content: 'weather in Paris and Rome?' },
      {
        role: 'assistant',
        content: 'Checking.',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
      { role: 'tool', tool_call_id: 'call_2', content: 'rain\n12C' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_3', type: 'function', function: { name: 'get_time', arguments: '{}' } }] },
    ]);
  });

  it('custom tool calls and their array outputs (Codex) → chat custom tool calls and tool messages', () => {
    const { chat } = translate({
      input: [
        { role: 'user', content: 'patch it' },
        { type: 'custom_tool_call', call_id: 'call_9', name: 'apply_patch', input: '*** Begin Patch' },
        { type: 'custom_tool_call_output', call_id: 'call_9', output: [{ type: 'input_text', text: 'Done!' }] },
      ],
    });
    assert.deepEqual(chat.messages.slice(1), [
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_9', type: 'custom', custom: { name: 'apply_patch', input: '*** Begin Patch' } }] },
      { role: 'tool', tool_call_id: 'call_9', content: 'Done!' },
    ]);
  });

  it('reasoning items are dropped with a warning by default, carried as reasoning_content on request', () => {
    const input = [
      { role: 'user', content: 'q' },
      { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'think' }], encrypted_content: 'gAAA' },
      { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c1', output: 'ok' },
      { type: 'reasoning', id: 'rs_2', summary: [], encrypted_content: 'gBBB' },
    ];
    const dropped = translate({ input });
    assert.deepEqual(dropped.chat.messages[1], { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] });
    assert.equal(dropped.chat.messages.length, 3);
    assert.deepEqual(dropped.warnings, ['2 reasoning item(s) in the input were left out: this backend takes no reasoning input.']);

    const carried = translate({ input }, { reasoning: 'carry' });
    assert.deepEqual(carried.chat.messages[1], {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }],
      reasoning_content: 'think',
    });
    assert.deepEqual(carried.warnings, ['1 reasoning item(s) in the input were left out: this backend takes no reasoning input.']);
  });

  it('replayed hosted-tool items are left out with a warning', () => {
    const { chat, warnings } = translate({
      input: [{ role: 'user', content: 'q' }, { type: 'web_search_call', id: 'ws_1', status: 'completed' }, { type: 'web_search_call', id: 'ws_2' }],
    });
    assert.equal(chat.messages.length, 1);
    assert.deepEqual(warnings, ["2 'web_search_call' input item(s) were left out: this backend cannot take them."]);
  });

  it('item_reference: refused without a resolver, 404 when unknown, translated in place when resolved', () => {
    let e = refused({ input: [{ type: 'item_reference', id: 'msg_1' }] });
    assert.equal(e.code, 'unsupported_parameter');
    assert.equal(e.param, 'input[0]');
    e = refused({ input: [{ id: 'msg_1' }] }, { resolveItem: () => undefined });
    assert.equal(e.status, 404);
    const { chat } = translate(
      { input: [{ id: 'msg_1' }, { role: 'user', content: 'and?' }] },
      { resolveItem: (id) => (id === 'msg_1' ? { type: 'message', role: 'user', content: 'stored' } : undefined) },
    );
    assert.deepEqual(chat.messages, [{ role: 'user', content: 'stored' }, { role: 'user', content: 'and?' }]);
  });

  it('a served turn (fromChat output, namespaced call included) replays as history for the next turn', () => {
    const tools = [{ type: 'namespace', name: 'fs', description: '', tools: [{ type: 'function', name: 'read' }] }];
    const first = parseResponsesRequest({ model: 'm', input: 'read a', tools });
    const served = fromChat(
      {
        id: 'c', object: 'chat.completion', created: 1, model: 'b',
        choices: [{ index: 0, finish_reason: 'tool_calls', logprobs: null, message: { role: 'assistant', content: 'Reading.', refusal: null, reasoning_content: 'plan', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'fs__read', arguments: '{"p":"a"}' } }] } as never }],
      } as ChatCompletion,
      { id: 'resp_1', createdAt: 1, model: 'm', request: first, names: toChat(first).names },
    );
    const history = [{ type: 'message', role: 'user', content: 'read a' }, ...(served.output as unknown as Array<Record<string, unknown>>)];
    const { chat, warnings } = translate({ previous_response_id: 'resp_1', input: [{ type: 'function_call_output', call_id: 'call_1', output: 'A' }], tools }, { history });
    assert.deepEqual(chat.messages, [
      { role: 'user', content: 'read a' },
      { role: 'assistant', content: 'Reading.', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'fs__read', arguments: '{"p":"a"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'A' },
    ]);
    assert.equal(warnings.length, 1, 'the reasoning item was left out');
  });

  it('history (previous_response_id) goes before input', () => {
    const { chat } = translate(
      { input: [{ type: 'function_call_output', call_id: 'c1', output: '42' }], previous_response_id: 'resp_1' },
      { history: [{ role: 'user', content: 'q' }, { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' }] },
    );
    assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant', 'tool']);
    assert.equal('previous_response_id' in chat, false);
  });
});

describe('toChat: tools and tool_choice', () => {
  const fn = { type: 'function', name: 'shell', description: 'run', parameters: { type: 'object' }, strict: false };
  const ns = { type: 'namespace', name: 'mcp_fs', description: 'files', tools: [{ type: 'function', name: 'read', parameters: { type: 'object' } }, { type: 'custom', name: 'write' }] };
  const custom = { type: 'custom', name: 'apply_patch', description: 'patch', format: { type: 'grammar', syntax: 'lark', definition: 'start: /.+/' } };

  it('function, custom and namespace tools map; hosted tools are left out with a warning', () => {
    const { chat, warnings, names } = translate({ input: 'x', tools: [fn, ns, custom, { type: 'web_search' }, { type: 'file_search', vector_store_ids: [] }], parallel_tool_calls: false, tool_choice: 'auto' });
    assert.deepEqual(chat.tools, [
      { type: 'function', function: { name: 'shell', description: 'run', parameters: { type: 'object' }, strict: false } },
      { type: 'function', function: { name: 'mcp_fs__read', parameters: { type: 'object' } } },
      { type: 'custom', custom: { name: 'mcp_fs__write' } },
      { type: 'custom', custom: { name: 'apply_patch', description: 'patch', format: { type: 'grammar', grammar: { syntax: 'lark', definition: 'start: /.+/' } } } },
    ]);
    assert.equal(chat.tool_choice, 'auto');
    assert.equal(chat.parallel_tool_calls, false);
    assert.deepEqual(warnings, [
      "tools[3]: the hosted tool 'web_search' cannot run on this backend; it was left out.",
      "tools[4]: the hosted tool 'file_search' cannot run on this backend; it was left out.",
    ]);
    assert.deepEqual(responsesName(names, 'mcp_fs__read'), { name: 'read', namespace: 'mcp_fs' });
    assert.deepEqual(responsesName(names, 'shell'), { name: 'shell' });
  });

  it('a namespaced function_call in the input is flattened the same way', () => {
    const { chat } = translate({ input: [{ type: 'function_call', call_id: 'c', namespace: 'mcp_fs', name: 'read', arguments: '{}' }], tools: [ns] });
    const m = chat.messages[0];
    assert.ok(m?.role === 'assistant');
    assert.deepEqual(m.tool_calls?.[0], { id: 'c', type: 'function', function: { name: 'mcp_fs__read', arguments: '{}' } });
  });

  it('long flattened names stay within 64 characters and reverse', () => {
    const long = flatName('n'.repeat(40), 'f'.repeat(40));
    assert.equal(long.length, 64);
    const { names } = translate({ input: 'x', tools: [{ type: 'namespace', name: 'n'.repeat(40), description: '', tools: [{ type: 'function', name: 'f'.repeat(40) }] }] });
    assert.deepEqual(names.get(long), { name: 'f'.repeat(40), namespace: 'n'.repeat(40) });
  });

  it('additional_tools items add their tools', () => {
    const { chat } = translate({ input: [{ role: 'user', content: 'x' }, { type: 'additional_tools', role: 'developer', tools: [custom] }] });
    assert.equal(chat.tools?.length, 1);
  });

  it('tool_choice: function, custom, allowed_tools mapped; forcing a hosted tool is a 400', () => {
    assert.deepEqual(translate({ input: 'x', tools: [fn], tool_choice: { type: 'function', name: 'shell' } }).chat.tool_choice, { type: 'function', function: { name: 'shell' } });
    assert.deepEqual(translate({ input: 'x', tools: [custom], tool_choice: { type: 'custom', name: 'apply_patch' } }).chat.tool_choice, { type: 'custom', custom: { name: 'apply_patch' } });
    const allowed = translate({ input: 'x', tools: [fn, custom], tool_choice: { type: 'allowed_tools', mode: 'required', tools: [{ type: 'function', name: 'shell' }, { type: 'web_search' }] } });
    assert.deepEqual(allowed.chat.tool_choice, { type: 'allowed_tools', allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'shell' } }] } });
    assert.equal(allowed.warnings.length, 1);
    for (const choice of [{ type: 'web_search_preview' }, { type: 'mcp', server_label: 'x' }]) {
      const e = refused({ input: 'x', tools: [fn, { type: 'web_search' }], tool_choice: choice });
      assert.equal(e.code, 'unsupported_parameter');
      assert.equal(e.param, 'tool_choice');
    }
    const e = refused({ input: 'x', tools: [{ type: 'web_search' }], tool_choice: 'required' });
    assert.equal(e.param, 'tool_choice');
  });

  it('with only hosted tools, tool_choice auto and parallel_tool_calls are not sent', () => {
    const { chat } = translate({ input: 'x', tools: [{ type: 'web_search' }], tool_choice: 'auto', parallel_tool_calls: true });
    assert.equal(chat.tools, undefined);
    assert.equal(chat.tool_choice, undefined);
    assert.equal(chat.parallel_tool_calls, undefined);
  });

  it('duplicate tool names (a flat name colliding with a namespaced one) are a 400', () => {
    const e = refused({ input: 'x', tools: [{ type: 'function', name: 'mcp_fs__read' }, ns] });
    assert.equal(e.status, 400);
    assert.equal(e.param, 'tools[1].tools[0].name');
  });
});

describe('toChat: settings', () => {
  it('carries sampling, limits, format, reasoning effort and bookkeeping fields', () => {
    const { chat, warnings } = translate({
      input: 'x',
      max_output_tokens: 300,
      temperature: 0.2,
      top_p: 0.9,
      user: 'u',
      safety_identifier: 's',
      prompt_cache_key: 'k',
      metadata: { a: 'b' },
      reasoning: { effort: 'low', summary: 'auto' },
      text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object' }, strict: true }, verbosity: 'low' },
      store: false,
      include: ['reasoning.encrypted_content'],
      truncation: 'auto',
    });
    assert.deepEqual(chat, {
      model: 'm',
      messages: [{ role: 'user', content: 'x' }],
      max_completion_tokens: 300,
      temperature: 0.2,
      top_p: 0.9,
      user: 'u',
      metadata: { a: 'b' },
      safety_identifier: 's',
      prompt_cache_key: 'k',
      reasoning_effort: 'low',
      verbosity: 'low',
      response_format: { type: 'json_schema', json_schema: { name: 'out', schema: { type: 'object' }, strict: true } },
    });
    assert.deepEqual(warnings, ["truncation 'auto' is not supported by this backend: the input is sent whole."]);
    assert.deepEqual(translate({ input: 'x', text: { format: { type: 'json_object' } } }).chat.response_format, { type: 'json_object' });
    assert.equal(translate({ input: 'x', text: { format: { type: 'text' } } }).chat.response_format, undefined);
  });

  it('background, prompt and conversation are refused', () => {
    assert.equal(refused({ input: 'x', background: true }).param, 'background');
    assert.equal(refused({ input: 'x', prompt: { id: 'pmpt_1' } }).param, 'prompt');
    assert.equal(refused({ input: 'x', conversation: 'conv_1' }).param, 'conversation');
  });
});
