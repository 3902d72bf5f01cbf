import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../../errors/gateway-error.ts';
import { chatRequestSchema } from '../chat/schema.ts';
import { parseMessagesRequest } from './schema.ts';
import { toChat, type ToChatOptions } from './to-chat.ts';

const base = { model: 'claude-x', max_tokens: 100 };
const translate = (body: Record<string, unknown>, opts?: ToChatOptions) => toChat(parseMessagesRequest({ ...base, ...body }), opts);

describe('messages → chat', () => {
  it('puts top-level system blocks and in-messages system turns into one leading system message, cache_control dropped silently', () => {
    const { chat, warnings } = translate({
      system: [{ type: 'text', text: 'A', cache_control: { type: 'ephemeral' } }, { type: 'text', text: 'B' }],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] },
        { role: 'system', content: 'C' },
        { role: 'assistant', content: 'hello' },
      ],
    });
    assert.deepEqual(chat.messages, [
      { role: 'system', content: 'A\n\nB\n\nC' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
    ]);
    assert.deepEqual(warnings, []);
    assert.equal(chat.max_tokens, 100);
    assert.equal(chat.model, 'claude-x');
  });

  it('maps images (base64 → data URL, url → url) and text documents', () => {
    const { chat } = translate({
      messages: [{ role: 'user', content: [
        { type: 'text', text: 'look' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBO' } },
        { type: 'image', source: { type: 'url', url: 'https://e.x/a.jpg' } },
        { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'body' }, title: 'Notes' },
        { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBE' }, title: 'r.pdf' },
      ] }],
    });
    assert.deepEqual(chat.messages, [{ role: 'user', content: [
      { type: 'text', text: 'look' },
      { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBO' } },
      { type: 'image_url', image_url: { url: 'https://e.x/a.jpg' } },
      { type: 'text', text: 'Notes\n\nbody' },
      { type: 'file', file: { filename: 'r.pdf', file_data: 'data:application/pdf;base64,JVBE' } },
    ] }]);
  });

  it('refuses with a 400 naming the block what a chat backend cannot receive: URL or Files-API documents, file images', () => {
    for (const [block, param] of [
      [{ type: 'document', source: { type: 'url', url: 'https://e.x/a.pdf' } }, 'messages[0].content[0].source'],
      [{ type: 'document', source: { type: 'file', file_id: 'file_1' } }, 'messages[0].content[0].source'],
      [{ type: 'image', source: { type: 'file', file_id: 'file_1' } }, 'messages[0].content[0].source'],
    ] as const) {
      assert.throws(() => translate({ messages: [{ role: 'user', content: [block] }] }), (e: unknown) => {
        assert.ok(e instanceof GatewayError);
        assert.equal(e.status, 400);
        assert.equal(e.param, param);
        assert.match(e.message, /Anthropic backends/);
        return true;
      });
    }
  });

  it('turns a tool round trip into assistant tool_calls and tool messages, is_error marked, tool images after', () => {
    const { chat } = translate({
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: [
          { type: 'text', text: 'Checking.' },
          { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
          { type: 'tool_use', id: 'toolu_2', name: 'snap', input: {} },
        ] },
        { role: 'user', content: [
          { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'sunny' }, { type: 'text', text: '21C' }] },
          { type: 'tool_result', tool_use_id: 'toolu_2', is_error: true, content: [
            { type: 'text', text: 'camera off' },
            { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: '/9j/' } },
          ] },
          { type: 'text', text: 'thanks' },
        ] },
      ],
    });
    assert.deepEqual(chat.messages.slice(1), [
      { role: 'assistant', content: 'Checking.', tool_calls: [
        { id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
        { id: 'toolu_2', type: 'function', function: { name: 'snap', arguments: '{}' } },
      ] },
      { role: 'tool', tool_call_id: 'toolu_1', content: 'sunny\n21C' },
      { role: 'tool', tool_call_id: 'toolu_2', content: 'Error: camera off' },
      { role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/jpeg;base64,/9j/' } }, { type: 'text', text: 'thanks' }] },
    ]);
    assert.ok(chatRequestSchema.safeParse(chat).success, 'a valid chat request');
  });

  it('sends an assistant turn of tool calls only with content null, and string tool results as they are', () => {
    const { chat } = translate({
      messages: [
        { role: 'user', content: 'x' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: { a: [1] } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'done' }] },
      ],
    });
    assert.deepEqual(chat.messages[1], { role: 'assistant', content: null, tool_calls: [{ id: 't1', type: 'function', function: { name: 'f', arguments: '{"a":[1]}' } }] });
    assert.deepEqual(chat.messages[2], { role: 'tool', tool_call_id: 't1', content: 'done' });
  });

  it('drops thinking history with a warning, or sends it as reasoning_content when the backend reads it', () => {
    const messages = [
      { role: 'user', content: 'q' },
      { role: 'assistant', content: [
        { type: 'thinking', thinking: 'let me see', signature: 'sig' },
        { type: 'redacted_thinking', data: 'opaque' },
        { type: 'text', text: 'A' },
      ] },
    ];
    const dropped = translate({ messages });
    assert.deepEqual(dropped.chat.messages[1], { role: 'assistant', content: 'A' });
    assert.equal(dropped.warnings.length, 2);
    assert.match(dropped.warnings.join('\n'), /messages\[1\]\.content\[0\]: thinking block dropped/);
    assert.match(dropped.warnings.join('\n'), /redacted_thinking/);
    const kept = translate({ messages }, { reasoningContent: true });
    assert.deepEqual(kept.chat.messages[1], { role: 'assistant', content: 'A', reasoning_content: 'let me see' });
    assert.equal(kept.warnings.length, 1);
  });

  it('maps tools and tool_choice; server tools and Anthropic-only fields are left out with warnings, never a 400', () => {
    const { chat, warnings } = translate({
      messages: [{ role: 'user', content: 'x' }],
      tools: [
        { name: 'get_weather', description: 'Weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } }, cache_control: { type: 'ephemeral' } },
        { name: 'later', input_schema: { type: 'object' }, defer_loading: true },
        { type: 'web_search_20250305', name: 'web_search', max_uses: 3 },
      ],
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
      thinking: { type: 'adaptive', display: 'omitted' },
      context_management: { edits: [] },
      output_config: { effort: 'high' },
      service_tier: 'auto',
    });
    assert.deepEqual(chat.tools, [
      { type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
      { type: 'function', function: { name: 'later', parameters: { type: 'object' } } },
    ]);
    assert.equal(chat.tool_choice, 'required');
    assert.equal(chat.parallel_tool_calls, false);
    for (const w of [/tools\[2\]: server tool "web_search_20250305"/, /tools\[1\]\.defer_loading/, /^thinking: dropped/, /^context_management: dropped/, /^output_config\.effort: dropped/, /^service_tier: dropped/]) {
      assert.ok(warnings.some((x) => w.test(x)), `${w} in ${JSON.stringify(warnings)}`);
    }
    for (const k of ['thinking', 'context_management', 'output_config', 'service_tier']) assert.equal(k in chat, false, k);
  });

  it('maps each tool_choice', () => {
    const tools = [{ name: 'f', input_schema: { type: 'object' } }];
    const msg = [{ role: 'user', content: 'x' }];
    assert.equal(translate({ messages: msg, tools, tool_choice: { type: 'auto' } }).chat.tool_choice, 'auto');
    assert.equal(translate({ messages: msg, tools, tool_choice: { type: 'none' } }).chat.tool_choice, 'none');
    assert.deepEqual(translate({ messages: msg, tools, tool_choice: { type: 'tool', name: 'f' } }).chat.tool_choice, { type: 'function', function: { name: 'f' } });
    assert.equal(translate({ messages: msg, tools, tool_choice: { type: 'auto', disable_parallel_tool_use: true } }).chat.parallel_tool_calls, false);
    assert.equal('parallel_tool_calls' in translate({ messages: msg, tools, tool_choice: { type: 'auto' } }).chat, false);
    const onlyServer = translate({ messages: msg, tools: [{ type: 'web_search_20250305', name: 'web_search' }], tool_choice: { type: 'any' } });
    assert.equal('tools' in onlyServer.chat, false);
    assert.equal('tool_choice' in onlyServer.chat, false);
  });

  it('carries sampling, stop sequences, user and stream with usage', () => {
    const { chat, warnings } = translate({
      messages: [{ role: 'user', content: 'x' }],
      temperature: 0.2,
      top_p: 0.9,
      top_k: 40,
      stop_sequences: ['END', '###'],
      metadata: { user_id: 'u-1' },
      stream: true,
    });
    assert.deepEqual(
      { t: chat.temperature, p: chat.top_p, k: chat.top_k, stop: chat.stop, user: chat.user, stream: chat.stream, so: chat.stream_options },
      { t: 0.2, p: 0.9, k: 40, stop: ['END', '###'], user: 'u-1', stream: true, so: { include_usage: true } },
    );
    assert.deepEqual(warnings, []);
    const noK = translate({ messages: [{ role: 'user', content: 'x' }], top_k: 5 }, { topK: false });
    assert.equal('top_k' in noK.chat, false);
    assert.match(noK.warnings[0] ?? '', /^top_k: dropped/);
  });

  it('maps output_config.format json_schema to response_format', () => {
    const schema = { type: 'object', properties: { a: { type: 'string' } } };
    const { chat, warnings } = translate({ messages: [{ role: 'user', content: 'x' }], output_config: { format: { type: 'json_schema', schema } } });
    assert.deepEqual(chat.response_format, { type: 'json_schema', json_schema: { name: 'output', schema } });
    assert.deepEqual(warnings, []);
  });

  it('does not warn for thinking disabled, and warns once per dropped block', () => {
    const { warnings } = translate({
      thinking: { type: 'disabled' },
      messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'container_upload', file_id: 'f' }] }],
    });
    assert.deepEqual(warnings, ['messages[0].content[1]: "container_upload" block dropped (not supported in a user turn by this backend)']);
  });
});
