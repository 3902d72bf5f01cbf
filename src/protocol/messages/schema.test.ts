import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../../errors/gateway-error.ts';
import { parseCountTokensRequest, parseMessagesRequest } from './schema.ts';

const base = { model: 'claude-sonnet-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] };

function refused(body: unknown): GatewayError {
  try {
    parseMessagesRequest(body);
  } catch (err) {
    assert.ok(err instanceof GatewayError);
    assert.equal(err.status, 400);
    assert.equal(err.type, 'invalid_request_error');
    return err;
  }
  assert.fail('expected a 400');
}

describe('messages request schema', () => {
  it('accepts what Claude Code sends: system blocks with cache_control, a system turn inside messages, betas, adaptive thinking', () => {
    const body = {
      model: 'claude-sonnet-4-5-20250929',
      max_tokens: 128000,
      stream: true,
      system: [
        { type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral' } },
        { type: 'text', text: 'env', cache_control: { type: 'ephemeral', ttl: '1h' } },
        { type: 'text', text: 'more' },
      ],
      messages: [
        { role: 'system', content: 'reminder' },
        { role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] },
      ],
      tools: [
        { name: 'Bash', description: 'run', input_schema: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object' } },
        { name: 'Later', input_schema: { type: 'object' }, defer_loading: true },
        { type: 'web_search_20250305', name: 'web_search', max_uses: 5 },
      ],
      metadata: { user_id: '{"device_id":"d","session_id":"s"}' },
      thinking: { type: 'adaptive', display: 'omitted' },
      context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
      output_config: { effort: 'high' },
    };
    const r = parseMessagesRequest(body);
    assert.equal(r, body, 'the client object itself is handed on');
  });

  it('takes every content block type, and block types newer than the gateway', () => {
    parseMessagesRequest({
      ...base,
      messages: [
        { role: 'user', content: [
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
          { type: 'image', source: { type: 'url', url: 'https://x/y.png' } },
          { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'doc' }, title: 't' },
          { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBE' } },
          { type: 'search_result', source: 's', title: 't', content: [{ type: 'text', text: 'x' }] },
          { type: 'brand_new_block', anything: 1 },
        ] },
        { role: 'assistant', content: [
          { type: 'thinking', thinking: 'hmm', signature: 'sig' },
          { type: 'redacted_thinking', data: 'xx' },
          { type: 'text', text: 'ok' },
          { type: 'tool_use', id: 'toolu_1', name: 'f', input: { a: 1 } },
        ] },
        { role: 'user', content: [
          { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'r' }, { type: 'tool_reference', tool_name: 'x' }], is_error: true },
        ] },
      ],
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
    });
  });

  it('treats null as absent', () => {
    parseMessagesRequest({ ...base, system: null, stream: null, tools: null, tool_choice: null, stop_sequences: null, temperature: null, top_k: null, metadata: null, thinking: null });
  });

  it('requires max_tokens as an integer ≥ 1, naming it', () => {
    assert.match(refused({ model: 'm', messages: base.messages }).message, /max_tokens/);
    assert.equal(refused({ ...base, max_tokens: 0 }).param, 'max_tokens');
    assert.equal(refused({ ...base, max_tokens: 1.5 }).param, 'max_tokens');
  });

  it('names the offending field of a known block with a bad shape', () => {
    const e = refused({ ...base, messages: [{ role: 'user', content: [{ type: 'text', text: 5 }] }] });
    assert.equal(e.param, 'messages[0].content[0].text');
    assert.match(e.message, /'messages\[0\]\.content\[0\]\.text': expected string/);
    const t = refused({ ...base, messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 'x', input: {} }] }] });
    assert.equal(t.param, 'messages[0].content[0].name');
    const img = refused({ ...base, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', data: 'x' } }] }] });
    assert.equal(img.param, 'messages[0].content[0].source.media_type');
  });

  it('refuses unknown roles, empty messages and a custom tool without input_schema', () => {
    assert.ok(refused({ ...base, messages: [{ role: 'tool', content: 'x' }] }).param?.startsWith('messages[0]'));
    assert.equal(refused({ ...base, messages: [] }).param, 'messages');
    assert.equal(refused({ ...base, tools: [{ name: 'f' }] }).param, 'tools[0].input_schema');
    assert.equal(refused({ ...base, tool_choice: { type: 'tool' } }).param, 'tool_choice.name');
  });

  it('count_tokens bodies need no max_tokens', () => {
    parseCountTokensRequest({ model: 'm', messages: base.messages });
    assert.throws(() => parseCountTokensRequest({ model: 'm' }), GatewayError);
  });
});
