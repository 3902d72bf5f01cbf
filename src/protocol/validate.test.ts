import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../errors/gateway-error.ts';
import { chatRequestSchema } from './chat/schema.ts';
import { embeddingRequestSchema } from './embeddings/schema.ts';
import { issuesToError, paramPath, parseRequest } from './validate.ts';

describe('paramPath', () => {
  it('formats paths the way OpenAI names a param', () => {
    assert.equal(paramPath([]), '');
    assert.equal(paramPath(['model']), 'model');
    assert.equal(paramPath(['messages', 0, 'content']), 'messages[0].content');
    assert.equal(paramPath(['messages', 2, 'content', 1, 'image_url', 'url']), 'messages[2].content[1].image_url.url');
    assert.equal(paramPath(['input', 3]), 'input[3]');
    assert.equal(paramPath(['input', 0, 1]), 'input[0][1]');
    assert.equal(paramPath(['response_format', 'json_schema', 'name']), 'response_format.json_schema.name');
    assert.equal(paramPath([0, 'a']), '[0].a');
  });
});

const MSGS = [{ role: 'user', content: 'hi' }];

function rejected(schema: Parameters<typeof parseRequest>[0], body: unknown): GatewayError {
  try {
    parseRequest(schema, body);
  } catch (err) {
    assert.ok(err instanceof GatewayError, `expected a GatewayError, got ${String(err)}`);
    assert.equal(err.status, 400);
    assert.equal(err.type, 'invalid_request_error');
    return err;
  }
  assert.fail(`expected ${JSON.stringify(body)} to be rejected`);
}

/** A readable message: names the param, and is not a raw zod dump. */
function assertReadable(e: GatewayError): void {
  if (e.param !== null) assert.ok(e.message.startsWith(`Invalid value for '${e.param}': `), e.message);
  assert.doesNotMatch(e.message, /[{}[\]]\s*"|"code"|"path"|Invalid input:/, e.message);
  assert.ok(e.message.length < 300, e.message);
}

describe('parseRequest (chat)', () => {
  const cases: Array<{ name: string; body: unknown; param: string | null; message: RegExp }> = [
    { name: 'not an object', body: [MSGS], param: null, message: /^The request body must be a JSON object\.$/ },
    { name: 'null', body: null, param: null, message: /must be a JSON object/ },
    { name: 'missing model', body: { messages: MSGS }, param: 'model', message: /expected string, received undefined/ },
    { name: 'empty model', body: { model: '', messages: MSGS }, param: 'model', message: />=\s?1/ },
    { name: 'messages not an array', body: { model: 'm', messages: 'hi' }, param: 'messages', message: /expected array, received string/ },
    { name: 'empty messages', body: { model: 'm', messages: [] }, param: 'messages', message: /Too small.*>=\s?1/ },
    {
      name: 'content of the wrong type',
      body: { model: 'm', messages: [{ role: 'user', content: 42 }] },
      param: 'messages[0].content',
      message: /expected string or array$/,
    },
    {
      name: 'unknown role',
      body: { model: 'm', messages: [{ role: 'user', content: 'a' }, { role: 'robot', content: 'b' }] },
      param: 'messages[1].role',
      message: /discriminator.*'system'.*'tool'/,
    },
    {
      name: 'unknown content part type',
      body: { model: 'm', messages: [{ role: 'user', content: [{ type: 'video' }] }] },
      param: 'messages[0].content[0].type',
      message: /'text' \| 'image_url'/,
    },
    {
      name: 'text part with a non-string text',
      body: { model: 'm', messages: [{ role: 'system', content: [{ type: 'text', text: 7 }] }] },
      param: 'messages[0].content[0].text',
      message: /expected string, received number$/,
    },
    {
      name: 'image part without a url',
      body: { model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] },
      param: 'messages[0].content[0].image_url.url',
      message: /expected string/,
    },
    {
      name: 'tool message without tool_call_id',
      body: { model: 'm', messages: [{ role: 'tool', content: 'r' }] },
      param: 'messages[0].tool_call_id',
      message: /expected string, received undefined/,
    },
    { name: 'temperature a string', body: { model: 'm', messages: MSGS, temperature: 'hot' }, param: 'temperature', message: /expected number, received string/ },
    { name: 'n not an integer', body: { model: 'm', messages: MSGS, n: 1.5 }, param: 'n', message: /expected int/ },
    { name: 'stop list with a number', body: { model: 'm', messages: MSGS, stop: ['a', 1] }, param: 'stop[1]', message: /expected string, received number/ },
    {
      name: 'response_format json_schema without a name',
      body: { model: 'm', messages: MSGS, response_format: { type: 'json_schema', json_schema: { schema: {} } } },
      param: 'response_format.json_schema.name',
      message: /expected string, received undefined/,
    },
    { name: 'response_format a string', body: { model: 'm', messages: MSGS, response_format: 'json' }, param: 'response_format', message: /expected object/ },
    {
      name: 'function tool with a numeric name',
      body: { model: 'm', messages: MSGS, tools: [{ type: 'function', function: { name: 5 } }] },
      param: 'tools[0].function.name',
      message: /expected string, received number$/,
    },
    { name: 'tool without a type', body: { model: 'm', messages: MSGS, tools: [{ function: { name: 'f' } }] }, param: 'tools[0].type', message: /expected/ },
    {
      name: 'custom tool call without its input',
      body: { model: 'm', messages: [...MSGS, { role: 'assistant', tool_calls: [{ id: 'c1', type: 'custom', custom: { name: 'x' } }] }] },
      param: 'messages[1].tool_calls[0].custom.input',
      message: /expected string, received undefined$/,
    },
  ];
  for (const c of cases) {
    it(`${c.name} → param ${String(c.param)}`, () => {
      const e = rejected(chatRequestSchema, c.body);
      assert.equal(e.param, c.param);
      assert.equal(e.code, null);
      assert.match(e.message, c.message);
      assertReadable(e);
    });
  }

  it('reports the first problem and counts the rest', () => {
    const one = rejected(chatRequestSchema, { model: 1, messages: 'x' });
    assert.equal(one.param, 'model');
    assert.match(one.message, /\(and 1 more problem\)$/);
    const many = rejected(chatRequestSchema, { model: 1, messages: 'x', temperature: 'y' });
    assert.match(many.message, /\(and 2 more problems\)$/);
  });

  it('accepts a valid request and keeps vendor extras', () => {
    const req = parseRequest(chatRequestSchema, { model: 'm', messages: MSGS, temperature: 0.2, top_k: 40, cache_prompt: true });
    assert.equal(req.model, 'm');
    assert.equal(req.temperature, 0.2);
    assert.equal((req as Record<string, unknown>).top_k, 40);
    assert.equal((req as Record<string, unknown>).cache_prompt, true);
  });
});

describe('parseRequest (chat shapes newer than the gateway, null optionals)', () => {
  const shapes: Array<{ name: string; body: Record<string, unknown> }> = [
    { name: 'a custom tool', body: { tools: [{ type: 'custom', custom: { name: 'code_exec' } }] } },
    {
      name: 'a custom tool with a grammar format',
      body: { tools: [{ type: 'custom', custom: { name: 'sql', description: 'd', format: { type: 'grammar', grammar: { definition: 'start: "x"', syntax: 'lark' } } } }] },
    },
    { name: 'a custom tool with a text format', body: { tools: [{ type: 'custom', custom: { name: 'x', format: { type: 'text' } } }] } },
    { name: 'a tool of a type not known yet', body: { tools: [{ type: 'web_search_2030', web_search_2030: {} }] } },
    {
      name: 'tool_choice allowed_tools',
      body: {
        tools: [{ type: 'function', function: { name: 'x' } }],
        tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'x' } }] } },
      },
    },
    { name: 'tool_choice custom', body: { tools: [{ type: 'custom', custom: { name: 'x' } }], tool_choice: { type: 'custom', custom: { name: 'x' } } } },
    {
      name: 'an assistant custom tool call in the history',
      body: {
        messages: [
          ...MSGS,
          { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'custom', custom: { name: 'code_exec', input: 'print(1)' } }] },
          { role: 'tool', tool_call_id: 'call_1', content: '1' },
        ],
      },
    },
    {
      name: 'null for every optional parameter',
      body: Object.fromEntries(
        ['tools', 'tool_choice', 'parallel_tool_calls', 'response_format', 'user', 'stop', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'seed', 'stream', 'stream_options', 'logprobs', 'top_logprobs', 'n', 'presence_penalty', 'frequency_penalty', 'logit_bias', 'metadata'].map((k) => [k, null]),
      ),
    },
    {
      name: 'nulls inside messages and tools (a message object sent back as the client got it)',
      body: {
        messages: [
          { role: 'user', content: 'hi', name: null },
          { role: 'assistant', content: 'hello', refusal: null, tool_calls: null, function_call: null, audio: null, annotations: [] },
          { role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x/y.png', detail: null } }] },
        ],
        tools: [{ type: 'function', function: { name: 'f', description: null, parameters: null, strict: null } }],
      },
    },
  ];
  for (const c of shapes) {
    it(`accepts ${c.name}`, () => {
      const body = { model: 'm', messages: MSGS, ...c.body };
      assert.equal(parseRequest(chatRequestSchema, body), body);
    });
  }

  it("hands on the client's own object: key order and nulls as sent", () => {
    const body = JSON.parse('{"messages":[{"content":"hi","role":"user","x":null}],"temperature":null,"zz":{"b":1,"a":2},"model":"m"}') as unknown;
    const req = parseRequest(chatRequestSchema, body);
    assert.equal(req, body);
    assert.equal(JSON.stringify(req), '{"messages":[{"content":"hi","role":"user","x":null}],"temperature":null,"zz":{"b":1,"a":2},"model":"m"}');
  });
});

describe('parseRequest (embeddings)', () => {
  it('empty input array → a message about the size, not the type', () => {
    const e = rejected(embeddingRequestSchema, { model: 'm', input: [] });
    assert.equal(e.param, 'input');
    assert.match(e.message, /Too small: expected array to have >=\s?1 items/);
    assertReadable(e);
  });

  it('empty string input', () => {
    const e = rejected(embeddingRequestSchema, { model: 'm', input: '' });
    assert.equal(e.param, 'input');
    assert.match(e.message, /must not be an empty string/);
  });

  it('input of the wrong type', () => {
    const e = rejected(embeddingRequestSchema, { model: 'm', input: 5 });
    assert.equal(e.param, 'input');
    assert.match(e.message, /expected string or array$/);
  });

  it('a negative token id', () => {
    const e = rejected(embeddingRequestSchema, { model: 'm', input: [1, -1] });
    assert.equal(e.param, 'input[1]');
    assertReadable(e);
  });
});

describe('issuesToError', () => {
  it('with no issues is still a 400 with a message', () => {
    const e = issuesToError([]);
    assert.equal(e.status, 400);
    assert.equal(e.param, null);
    assert.equal(e.message, 'Invalid request body.');
  });
});
