/**
 * Chat Completions shapes newer than the gateway's own schema (custom tools, `allowed_tools` and
 * custom tool choices, custom tool calls in the history) and `null` for optional parameters, as the
 * openai SDKs send them, over real HTTP:
 * - through an `openai` backend they reach the upstream as the client's body with only `model`
 *   replaced (same keys, same order, nulls kept), and the client gets the upstream's 200;
 * - through an `anthropic` backend, what Anthropic cannot express is a 400 `unsupported_parameter`
 *   naming the parameter, with Anthropic never called, no failover to a second target, and the
 *   target's breaker left closed; `null` optionals are simply absent.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic-upstream.ts';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';

const ANT_KEY = 'sk-ant-chat-shapes-secret';

const USER = { role: 'user', content: 'Run the code.' };
const FN_TOOL = { type: 'function', function: { name: 'x', parameters: { type: 'object', properties: {} } } };

/** Each shape: the request fields besides `model`, and the parameter a translating backend names. */
const SHAPES: Array<{ name: string; fields: Record<string, unknown>; param: string }> = [
  { name: 'a custom tool', fields: { messages: [USER], tools: [{ type: 'custom', custom: { name: 'code_exec' } }] }, param: 'tools[0]' },
  {
    name: 'a custom tool with a grammar format',
    fields: {
      messages: [USER],
      tools: [FN_TOOL, { type: 'custom', custom: { name: 'sql', description: 'SQL only', format: { type: 'grammar', grammar: { definition: 'start: "SELECT" NAME', syntax: 'lark' } } } }],
    },
    param: 'tools[1]',
  },
  { name: 'a custom tool with a text format', fields: { messages: [USER], tools: [{ type: 'custom', custom: { name: 'notes', format: { type: 'text' } } }] }, param: 'tools[0]' },
  {
    name: 'tool_choice custom',
    fields: { messages: [USER], tools: [FN_TOOL], tool_choice: { type: 'custom', custom: { name: 'code_exec' } } },
    param: 'tool_choice',
  },
  {
    name: 'tool_choice allowed_tools naming a custom tool',
    fields: { messages: [USER], tools: [FN_TOOL], tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [{ type: 'custom', custom: { name: 'code_exec' } }] } } },
    param: 'tool_choice.allowed_tools.tools[0]',
  },
  {
    name: 'an assistant custom tool call in the history',
    fields: {
      messages: [
        USER,
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'custom', custom: { name: 'code_exec', input: 'print(6 * 7)' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '42' },
      ],
    },
    param: 'messages[1].tool_calls[0]',
  },
];

const ALLOWED_TOOLS = {
  messages: [USER],
  tools: [FN_TOOL, { type: 'function', function: { name: 'y' } }],
  tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'x' } }] } },
};

/** `null` for every optional parameter clients send as "not set". */
const NULLS: Record<string, null> = Object.fromEntries(
  [
    'tools', 'tool_choice', 'parallel_tool_calls', 'response_format', 'user', 'stop', 'max_tokens', 'max_completion_tokens', 'temperature',
    'top_p', 'seed', 'stream_options', 'logprobs', 'top_logprobs', 'n', 'presence_penalty', 'frequency_penalty', 'logit_bias', 'metadata',
  ].map((k) => [k, null]),
);

/** `model` in the middle of the body, so a gateway that rebuilt the object would show. */
function clientBody(model: string, fields: Record<string, unknown>): Record<string, unknown> {
  const { messages, ...rest } = fields;
  return { messages, model, ...rest };
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

async function post(gw: TestGateway, body: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(`${gw.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** What the upstream received must be the client's bytes with only the model name replaced. */
function assertForwardedAsSent(up: FakeUpstream, sent: Record<string, unknown>, upstreamModel: string): void {
  assert.equal(up.requests.length, 1, 'one upstream call');
  const got = up.requests[0];
  assert.ok(got);
  assert.equal(got.path, '/v1/chat/completions');
  const expected = JSON.stringify({ ...sent, model: upstreamModel });
  // the fake keeps the parsed body: re-serialised compactly, it is the bytes the gateway sent
  assert.equal(JSON.stringify(got.body), expected);
  assert.equal(Number(got.headers['content-length']), Buffer.byteLength(expected), 'same byte length');
}

function assertUnsupported(a: Answer, param: string): void {
  assert.equal(a.status, 400, a.text);
  assert.deepEqual(Object.keys((a.json as { error: object }).error).sort(), ['code', 'message', 'param', 'type']);
  const e = (a.json as { error: { message: string; type: string; param: string | null; code: string | null } }).error;
  assert.equal(e.type, 'invalid_request_error');
  assert.equal(e.code, 'unsupported_parameter');
  assert.equal(e.param, param);
  assert.ok(e.message.includes(`'${param}'`), e.message);
}

describe('chat shapes newer than the gateway, and null optionals', () => {
  let up: FakeUpstream;
  let backup: FakeUpstream;
  let ant: FakeAnthropic;
  let gw: TestGateway;

  before(async () => {
    up = await startFakeOpenAI({ apiKey: 'sk-openai-upstream-key' });
    backup = await startFakeOpenAI({ apiKey: 'sk-backup-upstream-key' });
    ant = await startFakeAnthropic({ apiKey: ANT_KEY });
    gw = await startGateway(`
backends:
  oai: { type: openai, base_url: "${up.url}", api_key: sk-openai-upstream-key }
  backup: { type: openai, base_url: "${backup.url}", api_key: sk-backup-upstream-key }
  claude: { type: anthropic, base_url: "${ant.url}", api_key: "${ANT_KEY}" }
routing:
  # retries on, and one failure opens a breaker: a refusal counted against the target would show
  retry: { max_retries: 2, base_delay_ms: 1, max_delay_ms: 2 }
  breaker: { consecutive_failures: 1, open_ms: 60000, min_requests: 100000 }
cache: { enabled: false }
models:
  gpt: { targets: [ { backend: oai, model: gpt-upstream-1 } ] }
  claude: { targets: [ { backend: claude, model: claude-test-1 } ] }
  claude-then-backup:
    policy: fallback
    targets: [ { backend: claude, model: claude-test-2 }, { backend: backup, model: gpt-backup-1 } ]
`);
  });
  after(async () => {
    await gw?.close();
    await up?.close();
    await backup?.close();
    await ant?.close();
  });
  beforeEach(() => {
    up.reset();
    backup.reset();
    ant.reset();
  });

  describe('openai backend: forwarded as the client sent them', () => {
    const cases = [...SHAPES.map((s) => ({ name: s.name, fields: s.fields })), { name: 'tool_choice allowed_tools', fields: ALLOWED_TOOLS }, { name: 'null for every optional parameter', fields: { messages: [USER], ...NULLS } }];
    for (const c of cases) {
      test(`${c.name} → 200, upstream got the body byte-for-byte apart from model`, async () => {
        const sent = clientBody('gpt', c.fields);
        const a = await post(gw, sent);
        assert.equal(a.status, 200, a.text);
        assert.equal((a.json as { object?: string }).object, 'chat.completion');
        assert.equal(a.headers.get('x-switchyard-backend'), 'oai');
        assertForwardedAsSent(up, sent, 'gpt-upstream-1');
      });
    }

    test('null optionals in a stream → 200 event stream; only stream_options is set (usage), the rest as sent', async () => {
      const sent = clientBody('gpt', { messages: [USER], ...NULLS, stream: true });
      const a = await post(gw, sent);
      assert.equal(a.status, 200, a.text);
      assert.match(a.headers.get('content-type') ?? '', /text\/event-stream/);
      assert.match(a.text, /data: \[DONE\]\n\n$/);
      const got = up.requests[0]?.body as Record<string, unknown>;
      assert.deepEqual(got.stream_options, { include_usage: true });
      assert.equal(JSON.stringify({ ...got, stream_options: null }), JSON.stringify({ ...sent, model: 'gpt-upstream-1' }));
    });

    test('stream_options.include_usage: null is "not asked": 200, no usage chunk for the client', async () => {
      const a = await post(gw, clientBody('gpt', { messages: [USER], stream: true, stream_options: { include_usage: null } }));
      assert.equal(a.status, 200, a.text);
      assert.match(a.text, /data: \[DONE\]\n\n$/);
      assert.doesNotMatch(a.text, /"usage"/, 'the client did not ask for usage');
      assert.deepEqual((up.requests[0]?.body as Record<string, unknown>).stream_options, { include_usage: true });
    });
  });

  describe('anthropic backend: what Anthropic cannot express is refused, nulls are absent', () => {
    for (const s of SHAPES) {
      test(`${s.name} → 400 unsupported_parameter, param ${s.param}; Anthropic not called`, async () => {
        const a = await post(gw, clientBody('claude', s.fields));
        assertUnsupported(a, s.param);
        assert.equal(ant.requests.length, 0, 'the Anthropic upstream was not called');
      });

      test(`${s.name} with a fallback target → still the 400; the fallback not called, the breaker still closed`, async () => {
        const a = await post(gw, clientBody('claude-then-backup', s.fields));
        assertUnsupported(a, s.param);
        assert.equal(ant.requests.length, 0, 'the Anthropic upstream was not called');
        assert.equal(backup.requests.length, 0, 'no failover to the second target');
        // consecutive_failures: 1 — had the refusal counted, the next request would skip claude
        const ok = await post(gw, clientBody('claude-then-backup', { messages: [USER] }));
        assert.equal(ok.status, 200, ok.text);
        assert.equal(ok.headers.get('x-switchyard-backend'), 'claude');
        assert.equal(ok.headers.get('x-switchyard-attempts'), '1');
        assert.equal(backup.requests.length, 0);
      });
    }

    test('tool_choice allowed_tools (mode auto) → 200; Anthropic gets only the allowed tools with tool_choice auto', async () => {
      const a = await post(gw, clientBody('claude', ALLOWED_TOOLS));
      assert.equal(a.status, 200, a.text);
      const body = ant.requests.at(-1)?.body as { tools?: Array<{ name: string }>; tool_choice?: unknown };
      assert.deepEqual(body.tools?.map((t) => t.name), ['x']);
      assert.deepEqual(body.tool_choice, { type: 'auto' });
    });

    test('null for every optional parameter → 200, and Anthropic gets none of them', async () => {
      const a = await post(gw, clientBody('claude', { messages: [USER], ...NULLS }));
      assert.equal(a.status, 200, a.text);
      assert.equal((a.json as { object?: string }).object, 'chat.completion');
      const body = ant.requests.at(-1)?.body as Record<string, unknown>;
      assert.deepEqual(Object.keys(body).sort(), ['max_tokens', 'messages', 'model']);
      assert.equal(typeof body.max_tokens, 'number');
    });

    test('null optionals in a stream → 200 event stream', async () => {
      const a = await post(gw, clientBody('claude', { messages: [USER], ...NULLS, stream: true }));
      assert.equal(a.status, 200, a.text);
      assert.match(a.headers.get('content-type') ?? '', /text\/event-stream/);
      assert.match(a.text, /data: \[DONE\]\n\n$/);
      const body = ant.requests.at(-1)?.body as Record<string, unknown>;
      assert.deepEqual(Object.keys(body).sort(), ['max_tokens', 'messages', 'model', 'stream']);
    });
  });
});
