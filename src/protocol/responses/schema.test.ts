import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../../errors/gateway-error.ts';
import { parseResponsesRequest } from './schema.ts';

function rejected(body: unknown): GatewayError {
  try {
    parseResponsesRequest(body);
  } catch (err) {
    assert.ok(err instanceof GatewayError, `expected a GatewayError, got ${String(err)}`);
    assert.equal(err.status, 400);
    assert.equal(err.type, 'invalid_request_error');
    return err;
  }
  assert.fail(`expected ${JSON.stringify(body)} to be rejected`);
}

describe('responses request schema', () => {
  it('accepts what Codex sends, unknown fields and types included, and hands back the same object', () => {
    const body = {
      model: 'gpt-5-codex',
      instructions: 'You are Codex.',
      input: [
        { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'sandbox: none' }] },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'list files' }] },
        { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'gAAA' },
        { type: 'function_call', id: 'fc_1', status: 'completed', call_id: 'call_1', name: 'shell', arguments: '{"cmd":["ls"]}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'a.txt' },
        { type: 'custom_tool_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: 'done' }] },
        { type: 'additional_tools', role: 'developer', tools: [{ type: 'custom', name: 'apply_patch', format: { type: 'grammar', syntax: 'lark', definition: 'start: /.+/' } }] },
        { type: 'web_search_call', id: 'ws_1', status: 'completed', action: { type: 'search' } },
        { id: 'msg_earlier' },
        { role: 'user', content: 'no type: a message' },
      ],
      tools: [
        { type: 'function', name: 'shell', strict: false, parameters: { type: 'object' } },
        { type: 'namespace', name: 'mcp__fs', description: 'files', tools: [{ type: 'function', name: 'read' }] },
        { type: 'web_search' },
      ],
      tool_choice: 'auto',
      parallel_tool_calls: false,
      reasoning: { effort: 'medium', summary: 'auto' },
      store: false,
      stream: true,
      include: ['reasoning.encrypted_content'],
      prompt_cache_key: 'abc',
      text: { verbosity: 'low' },
      client_metadata: { x: 1 },
    };
    const parsed = parseResponsesRequest(body);
    assert.deepEqual(parsed, body);
  });

  it('null means absent for every optional field', () => {
    const body = {
      model: 'm', input: 'hi', instructions: null, stream: null, tools: null, tool_choice: null, temperature: null,
      top_p: null, max_output_tokens: null, text: null, reasoning: null, store: null, previous_response_id: null,
      parallel_tool_calls: null, metadata: null, user: null,
    };
    assert.deepEqual(parseResponsesRequest(body), body);
  });

  const cases: Array<{ name: string; body: unknown; param: string | null }> = [
    { name: 'missing model', body: { input: 'hi' }, param: 'model' },
    { name: 'a non-string model', body: { model: 5, input: 'hi' }, param: 'model' },
    { name: 'input of the wrong type', body: { model: 'm', input: 5 }, param: 'input' },
    { name: 'a bad role', body: { model: 'm', input: [{ role: 'bot', content: 'x' }] }, param: 'input[0].role' },
    { name: 'an input_text part without text', body: { model: 'm', input: [{ role: 'user', content: [{ type: 'input_text' }] }] }, param: 'input[0].content[0].text' },
    { name: 'a function_call without call_id', body: { model: 'm', input: [{ type: 'function_call', name: 'f', arguments: '{}' }] }, param: 'input[0].call_id' },
    { name: 'a function_call_output without output', body: { model: 'm', input: [{ type: 'function_call_output', call_id: 'c' }] }, param: 'input[0].output' },
    { name: 'an item reference with a bad id', body: { model: 'm', input: [{ id: 5 }] }, param: 'input[0].id' },
    { name: 'a string among items', body: { model: 'm', input: ['hi'] }, param: 'input[0]' },
    { name: 'a function tool without name', body: { model: 'm', input: 'hi', tools: [{ type: 'function' }] }, param: 'tools[0].name' },
    { name: 'a namespaced function without name', body: { model: 'm', input: 'hi', tools: [{ type: 'namespace', name: 'ns', tools: [{ type: 'function' }] }] }, param: 'tools[0].tools[0].name' },
    { name: 'a json_schema format without name', body: { model: 'm', input: 'hi', text: { format: { type: 'json_schema', schema: {} } } }, param: 'text.format.name' },
    { name: 'tool_choice function without name', body: { model: 'm', input: 'hi', tool_choice: { type: 'function' } }, param: 'tool_choice.name' },
    { name: 'tool_choice of the wrong type', body: { model: 'm', input: 'hi', tool_choice: 5 }, param: 'tool_choice' },
    { name: 'max_output_tokens 0', body: { model: 'm', input: 'hi', max_output_tokens: 0 }, param: 'max_output_tokens' },
    { name: 'temperature out of range', body: { model: 'm', input: 'hi', temperature: 3 }, param: 'temperature' },
    { name: 'metadata values not strings', body: { model: 'm', input: 'hi', metadata: { a: 1 } }, param: 'metadata.a' },
  ];
  for (const c of cases) {
    it(`${c.name} → 400 naming ${String(c.param)}`, () => {
      const e = rejected(c.body);
      assert.equal(e.param, c.param);
      assert.ok(e.message.startsWith(`Invalid value for '${c.param}': `), e.message);
      assert.doesNotMatch(e.message, /"code"|"path"|Invalid input:/);
    });
  }

  it('a body that is not an object', () => {
    assert.equal(rejected([1]).param, null);
  });
});
