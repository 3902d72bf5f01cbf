/**
 * `POST /v1/responses` and the stored responses on the wire, through the translated path: a
 * Responses request → the gateway's chat operation → OpenAI-compatible and Anthropic fakes. Checks
 * the SSE framing and event order, the commit point (failover before it, an `error` event after
 * it), the per-key store (`previous_response_id`, GET / input_items / DELETE, another key's id),
 * and a Codex-like request against a chat backend (answered, warnings in a header and the log).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { RecordedRequest } from './support/fake-openai-upstream.ts';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic-upstream.ts';
import type { TestGateway } from './support/gateway.ts';
import { upstreamsWithGateway } from './support/suite.ts';

const UPSTREAM_KEY = 'sk-test-upstream-secret';
const KEY_A = 'sk-gw-team-a-123';
const KEY_B = 'sk-gw-team-b-456';
const ANT_KEY = 'sk-ant-test';

type Json = Record<string, unknown>;

const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

interface SseEvent {
  event: string;
  data: Json;
}

/** Parses an SSE body framed as OpenAI frames Responses streams: `event:` + `data:` + blank line. */
function parseSse(text: string): SseEvent[] {
  assert.ok(text === '' || text.endsWith('\n\n'), 'the stream ends on a frame boundary');
  const frames = text.split('\n\n').filter((f) => f !== '');
  return frames.map((f) => {
    const lines = f.split('\n');
    assert.equal(lines.length, 2, `a frame is one event line and one data line: ${JSON.stringify(f)}`);
    const [ev, data] = lines as [string, string];
    assert.ok(ev.startsWith('event: '), ev);
    assert.ok(data.startsWith('data: '), data);
    const parsed: unknown = JSON.parse(data.slice('data: '.length));
    assert.ok(isRecord(parsed));
    assert.equal(parsed['type'], ev.slice('event: '.length), 'the event line names the data type');
    return { event: ev.slice('event: '.length), data: parsed };
  });
}

function chatBodies(reqs: RecordedRequest[]): Json[] {
  return reqs.filter((r) => r.path === '/v1/chat/completions').map((r) => {
    assert.ok(isRecord(r.body));
    return r.body;
  });
}

async function post(gw: TestGateway, body: unknown, key = KEY_A, headers: Record<string, string> = {}): Promise<globalThis.Response> {
  return fetch(`${gw.baseURL}/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

async function call(gw: TestGateway, method: string, path: string, key = KEY_A): Promise<{ status: number; body: Json }> {
  const r = await fetch(`${gw.baseURL}${path}`, { method, headers: { authorization: `Bearer ${key}` } });
  const body: unknown = await r.json();
  assert.ok(isRecord(body));
  return { status: r.status, body };
}

/** The access-log line of a request (written when the response closes, so poll briefly). */
async function logLine(gw: TestGateway, requestId: string): Promise<Json> {
  const deadline = Date.now() + 2000;
  for (;;) {
    for (const l of gw.logs) {
      const j = JSON.parse(l) as Json;
      if (j['msg'] === 'request' && j['request_id'] === requestId) return j;
    }
    if (Date.now() > deadline) return assert.fail(`no access-log line for ${requestId}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function assertError(body: Json, param: string | null, code: string | null): void {
  assert.ok(isRecord(body.error), JSON.stringify(body));
  const e = body.error;
  assert.deepEqual(Object.keys(e).sort(), ['code', 'message', 'param', 'type']);
  assert.equal(e.type, 'invalid_request_error');
  assert.equal(e.param, param);
  assert.equal(e.code, code);
}

describe('/v1/responses through the chat path (OpenAI-compatible upstreams)', () => {
  const ctx = upstreamsWithGateway({
    upstreams: { fakeA: { apiKey: UPSTREAM_KEY }, fakeB: { apiKey: UPSTREAM_KEY } },
    yaml: ({ fakeA, fakeB }) => `
routing: { retry: { max_retries: 0 }, breaker: { consecutive_failures: 0, min_requests: 1000000 } }
backends:
  a: { type: openai, base_url: "${fakeA.url}", api_key: "${UPSTREAM_KEY}" }
  b: { type: openai, base_url: "${fakeB.url}", api_key: "${UPSTREAM_KEY}" }
models:
  gpt-test: { targets: [ { backend: a, model: upstream-a } ] }
  gpt-failover: { policy: fallback, targets: [ { backend: a, model: upstream-a }, { backend: b, model: upstream-b } ] }
keys:
  - { name: team-a, key: "${KEY_A}" }
  - { name: team-b, key: "${KEY_B}" }
`,
  });

  test('JSON: a Response object with the public model name, output text and usage', async () => {
    const r = await post(ctx.gw, { model: 'gpt-test', instructions: 'Be brief.', input: 'Say hello' });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(r.headers.get('x-switchyard-backend'), 'a');
    assert.ok(r.headers.get('x-request-id'));
    const body = (await r.json()) as Json;
    assert.match(String(body.id), /^resp_/);
    assert.equal(body.object, 'response');
    assert.equal(body.status, 'completed');
    assert.equal(body.model, 'gpt-test');
    assert.equal(body.instructions, 'Be brief.');
    const output = body.output as Json[];
    assert.equal(output.length, 1);
    assert.equal(output[0]?.type, 'message');
    assert.deepEqual((output[0]?.content as Json[]).map((c) => [c.type, c.text]), [['output_text', 'Hello from upstream-a']]);
    const usage = body.usage as Json;
    assert.ok((usage.input_tokens as number) > 0);
    assert.equal(usage.output_tokens, 3);
    assert.equal(usage.total_tokens, (usage.input_tokens as number) + 3);
    const [sent] = chatBodies(ctx.fakeA.requests);
    assert.equal(sent?.model, 'upstream-a');
    assert.deepEqual(sent?.messages, [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Say hello' },
    ]);
  });

  test('stream: SSE events framed as OpenAI frames them, in order, with rising sequence numbers', async () => {
    const r = await post(ctx.gw, { model: 'gpt-test', input: 'Say hello', stream: true });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.equal(r.headers.get('x-switchyard-backend'), 'a');
    assert.equal(r.headers.get('x-switchyard-model'), 'upstream-a');
    const events = parseSse(await r.text());
    const types = events.map((e) => e.event);
    assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
    assert.deepEqual(types.slice(-4), ['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
    assert.deepEqual(
      events.map((e) => e.data.sequence_number),
      events.map((_, i) => i),
    );
    const text = events.filter((e) => e.event === 'response.output_text.delta').map((e) => e.data.delta).join('');
    assert.equal(text, 'Hello from upstream-a');
    const done = events.at(-1)?.data.response as Json;
    assert.equal(done.status, 'completed');
    assert.equal(done.model, 'gpt-test');
    assert.equal((done.usage as Json).output_tokens, 3);
    const [sent] = chatBodies(ctx.fakeA.requests);
    assert.equal(sent?.stream, true);
    assert.deepEqual(sent?.stream_options, { include_usage: true });
  });

  test('stream: a 503 before any content fails over to the next target, which serves the stream', async () => {
    ctx.fakeA.enqueue({ kind: 'error', status: 503, message: 'overloaded' });
    const r = await post(ctx.gw, { model: 'gpt-failover', input: 'Say hello', stream: true });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-switchyard-backend'), 'b');
    assert.equal(r.headers.get('x-switchyard-attempts'), '2');
    const events = parseSse(await r.text());
    assert.equal(events[0]?.event, 'response.created');
    assert.equal(events.at(-1)?.event, 'response.completed');
    assert.equal(events.filter((e) => e.event === 'response.output_text.delta').map((e) => e.data.delta).join(''), 'Hello from upstream-b');
    assert.equal(events.filter((e) => e.event === 'response.created').length, 1, 'the failed attempt left nothing in the stream');
  });

  test('stream: a cut after content ends the stream with an error event, never response.completed', async () => {
    ctx.fakeA.enqueue({ kind: 'stream', chunks: ['one ', 'two ', 'three'], dropAfter: 1 });
    const r = await post(ctx.gw, { model: 'gpt-failover', input: 'Count', stream: true });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-switchyard-backend'), 'a');
    const events = parseSse(await r.text());
    const types = events.map((e) => e.event);
    assert.ok(types.includes('response.output_text.delta'), 'the content before the cut reached the client');
    assert.equal(types.at(-1), 'error');
    assert.ok(!types.includes('response.completed'));
    const err = events.at(-1)?.data as Json;
    assert.equal(typeof err.message, 'string');
    assert.equal(typeof err.code, 'string');
    assert.equal(chatBodies(ctx.fakeB.requests).length, 0, 'no failover after the commit point');
    const log = await logLine(ctx.gw, r.headers.get('x-request-id') ?? '');
    assert.equal(typeof log.error, 'string');
  });

  test('stream: the client going away aborts the upstream request', async () => {
    ctx.fakeA.enqueue({ kind: 'stream', chunks: ['a ', 'b ', 'c ', 'd'], stallAfter: 1 });
    const ac = new AbortController();
    const r = await fetch(`${ctx.gw.baseURL}/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-test', input: 'go', stream: true }),
      signal: ac.signal,
    });
    const reader = r.body?.getReader();
    assert.ok(reader);
    let seen = '';
    while (!seen.includes('response.output_text.delta')) {
      const { value, done } = await reader.read();
      assert.ok(!done, 'the stream stays open while the upstream stalls');
      seen += new TextDecoder().decode(value);
    }
    ac.abort();
    await ctx.fakeA.waitForClientAbort();
  });

  test('previous_response_id: the stored conversation is sent again, without the old instructions', async () => {
    const first = (await (await post(ctx.gw, { model: 'gpt-test', instructions: 'Old rules.', input: 'My name is Ada.' })).json()) as Json;
    const r = await post(ctx.gw, { model: 'gpt-test', instructions: 'New rules.', input: 'What is my name?', previous_response_id: first.id });
    assert.equal(r.status, 200);
    const second = (await r.json()) as Json;
    assert.equal(second.previous_response_id, first.id);
    const sent = chatBodies(ctx.fakeA.requests)[1];
    assert.deepEqual(sent?.messages, [
      { role: 'system', content: 'New rules.' },
      { role: 'user', content: 'My name is Ada.' },
      { role: 'assistant', content: 'Hello from upstream-a' },
      { role: 'user', content: 'What is my name?' },
    ]);
  });

  test('a stored stream answers GET, input_items and previous_response_id once it finished', async () => {
    const r = await post(ctx.gw, { model: 'gpt-test', input: 'Streamed turn', stream: true });
    const events = parseSse(await r.text());
    const done = events.at(-1)?.data.response as Json;
    const got = await call(ctx.gw, 'GET', `/responses/${String(done.id)}`);
    assert.equal(got.status, 200);
    assert.deepEqual(got.body, done);
    const items = await call(ctx.gw, 'GET', `/responses/${String(done.id)}/input_items`);
    assert.equal(items.status, 200);
    assert.equal(items.body.object, 'list');
    const data = items.body.data as Json[];
    assert.equal(data.length, 1);
    assert.equal(data[0]?.role, 'user');
    assert.deepEqual(data[0]?.content, [{ type: 'input_text', text: 'Streamed turn' }]);
    assert.equal(items.body.first_id, data[0]?.id);
    assert.equal(items.body.has_more, false);
    const next = await post(ctx.gw, { model: 'gpt-test', input: 'And now?', previous_response_id: done.id });
    assert.equal(next.status, 200);
    assert.deepEqual(
      (chatBodies(ctx.fakeA.requests)[1]?.messages as Json[]).map((m) => m.content),
      ['Streamed turn', 'Hello from upstream-a', 'And now?'],
    );
  });

  test('unknown or another key’s previous_response_id: 400 previous_response_not_found', async () => {
    const unknown = await post(ctx.gw, { model: 'gpt-test', input: 'x', previous_response_id: 'resp_nope' });
    assert.equal(unknown.status, 400);
    const body = (await unknown.json()) as Json;
    assertError(body, 'previous_response_id', 'previous_response_not_found');
    assert.equal((body.error as Json).message, "Previous response with id 'resp_nope' not found.");

    const mine = (await (await post(ctx.gw, { model: 'gpt-test', input: 'private' })).json()) as Json;
    const theirs = await post(ctx.gw, { model: 'gpt-test', input: 'x', previous_response_id: mine.id }, KEY_B);
    assert.equal(theirs.status, 400);
    assertError((await theirs.json()) as Json, 'previous_response_id', 'previous_response_not_found');
    assert.equal(chatBodies(ctx.fakeA.requests).length, 1, 'refused before any upstream call');
  });

  test('GET / input_items / DELETE: another key’s id is a 404, as an unknown one; delete removes it', async () => {
    const mine = (await (await post(ctx.gw, { model: 'gpt-test', input: 'keep me' })).json()) as Json;
    const id = String(mine.id);
    for (const [method, path] of [
      ['GET', `/responses/${id}`],
      ['GET', `/responses/${id}/input_items`],
      ['DELETE', `/responses/${id}`],
    ] as const) {
      const other = await call(ctx.gw, method, path, KEY_B);
      assert.equal(other.status, 404, `${method} ${path} with another key`);
      assertError(other.body, null, null);
      assert.equal((other.body.error as Json).message, `Response with id '${id}' not found.`);
    }
    assert.equal((await call(ctx.gw, 'GET', `/responses/${id}`)).status, 200, 'still there for its owner');
    const del = await call(ctx.gw, 'DELETE', `/responses/${id}`);
    assert.equal(del.status, 200);
    assert.deepEqual(del.body, { id, object: 'response', deleted: true });
    assert.equal((await call(ctx.gw, 'GET', `/responses/${id}`)).status, 404);
    assert.equal((await call(ctx.gw, 'DELETE', `/responses/${id}`)).status, 404);
  });

  test('item_reference without previous_response_id: an output item of a stored response is sent as its content', async () => {
    const first = (await (await post(ctx.gw, { model: 'gpt-test', input: 'Tell me something.' })).json()) as Json;
    const answer = (first.output as Json[])[0];
    assert.equal(answer?.type, 'message');
    const r = await post(ctx.gw, { model: 'gpt-test', store: true, input: [{ type: 'item_reference', id: answer?.id }, { role: 'user', content: 'Say it again.' }] });
    assert.equal(r.status, 200);
    const second = (await r.json()) as Json;
    assert.deepEqual(chatBodies(ctx.fakeA.requests)[1]?.messages, [
      { role: 'assistant', content: 'Hello from upstream-a' },
      { role: 'user', content: 'Say it again.' },
    ]);
    // the item itself is what was stored: the conversation continues without the reference
    const items = await call(ctx.gw, 'GET', `/responses/${String(second.id)}/input_items?order=asc`);
    assert.equal((items.body.data as Json[])[0]?.id, answer?.id);
    assert.deepEqual((items.body.data as Json[])[0]?.content, answer?.content);
    const third = await post(ctx.gw, { model: 'gpt-test', input: 'Once more.', previous_response_id: second.id });
    assert.equal(third.status, 200);
    assert.deepEqual(
      (chatBodies(ctx.fakeA.requests)[2]?.messages as Json[]).map((m) => [m.role, m.content]),
      [['assistant', 'Hello from upstream-a'], ['user', 'Say it again.'], ['assistant', 'Hello from upstream-a'], ['user', 'Once more.']],
    );
  });

  test('item_reference to an input item of a stored response (an id input_items lists)', async () => {
    const first = (await (await post(ctx.gw, { model: 'gpt-test', input: [{ role: 'user', content: 'Remember: the code is 7421.' }] })).json()) as Json;
    const items = await call(ctx.gw, 'GET', `/responses/${String(first.id)}/input_items`);
    const itemId = (items.body.data as Json[])[0]?.id;
    assert.equal(typeof itemId, 'string');
    const r = await post(ctx.gw, { model: 'gpt-test', store: false, input: [{ type: 'item_reference', id: itemId }, { role: 'user', content: 'What is the code?' }] });
    assert.equal(r.status, 200);
    const sent = chatBodies(ctx.fakeA.requests)[1]?.messages as Json[];
    assert.equal(sent.length, 2);
    assert.equal(sent[0]?.role, 'user');
    assert.match(JSON.stringify(sent[0]?.content), /the code is 7421/);
    assert.equal(sent[1]?.content, 'What is the code?');
  });

  test('item_reference to another key’s item, an unknown one, or one of a deleted response: 404, before any upstream call', async () => {
    const mine = (await (await post(ctx.gw, { model: 'gpt-test', input: 'private' })).json()) as Json;
    const itemId = String((mine.output as Json[])[0]?.id);
    const cases: Array<[string, string, string]> = [
      ['another key', KEY_B, itemId],
      ['unknown id', KEY_A, 'msg_0123456789abcdef'],
    ];
    for (const [what, key, id] of cases) {
      const r = await post(ctx.gw, { model: 'gpt-test', input: [{ type: 'item_reference', id }, { role: 'user', content: 'x' }] }, key);
      assert.equal(r.status, 404, what);
      const body = (await r.json()) as Json;
      assertError(body, 'input', null);
      assert.equal((body.error as Json).message, `Item with id '${id}' not found.`, what);
    }
    const ok = await post(ctx.gw, { model: 'gpt-test', store: false, input: [{ id: itemId }, { role: 'user', content: 'x' }] });
    assert.equal(ok.status, 200, 'its owner resolves it (an item without type or role is a reference)');
    assert.equal((await call(ctx.gw, 'DELETE', `/responses/${String(mine.id)}`)).status, 200);
    const gone = await post(ctx.gw, { model: 'gpt-test', input: [{ type: 'item_reference', id: itemId }] });
    assert.equal(gone.status, 404);
    assertError((await gone.json()) as Json, 'input', null);
    assert.equal(chatBodies(ctx.fakeA.requests).length, 2, 'only the first turn and the resolved one reached the upstream');
  });

  test('store: false keeps nothing', async () => {
    const r = (await (await post(ctx.gw, { model: 'gpt-test', input: 'forget me', store: false })).json()) as Json;
    assert.equal(r.store, false);
    assert.equal((await call(ctx.gw, 'GET', `/responses/${String(r.id)}`)).status, 404);
  });

  test('a Codex-like request against a chat backend works; what was left out is in a header and the log', async () => {
    const body = {
      model: 'gpt-test',
      stream: true,
      store: false,
      instructions: 'You are a coding agent.',
      include: ['reasoning.encrypted_content'],
      prompt_cache_key: 'conv-1',
      reasoning: { effort: 'medium', summary: 'auto' },
      text: { verbosity: 'low' },
      client_metadata: { originator: 'codex_cli_rs' },
      tool_choice: 'auto',
      parallel_tool_calls: false,
      tools: [
        { type: 'function', name: 'shell', description: 'Run a command', strict: false, parameters: { type: 'object', properties: { cmd: { type: 'string' } } } },
        { type: 'namespace', name: 'mcp_fs', description: 'files', tools: [{ type: 'function', name: 'read', description: 'Read a file', strict: false, parameters: { type: 'object', properties: {} } }] },
        { type: 'web_search' },
      ],
      input: [
        { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'Sandbox: workspace-write.' }] },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'List the files.' }] },
        {
          type: 'additional_tools',
          tools: [{ type: 'custom', name: 'apply_patch', description: 'Patch files', format: { type: 'grammar', syntax: 'lark', definition: 'start: "*** Begin Patch"' } }],
        },
        { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'gAAAAB…opaque' },
        { type: 'function_call', id: 'fc_1', status: 'completed', call_id: 'call_1', name: 'shell', arguments: '{"cmd":"ls"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'README.md\nsrc' },
        { type: 'custom_tool_call', id: 'ctc_1', status: 'completed', call_id: 'call_2', name: 'apply_patch', input: '*** Begin Patch' },
        { type: 'custom_tool_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: 'Done!' }] },
      ],
    };
    const r = await post(ctx.gw, body);
    assert.equal(r.status, 200);
    const warnings = r.headers.get('x-switchyard-warnings');
    assert.ok(warnings, 'a warnings header');
    assert.match(warnings, /web_search/);
    assert.match(warnings, /^[\x20-\x7e]+$/, 'printable ASCII only');
    assert.ok(warnings.length <= 1024);
    const events = parseSse(await r.text());
    assert.equal(events.at(-1)?.event, 'response.completed');
    assert.equal(events.filter((e) => e.event === 'response.output_item.done').length, 1);
    const sent = chatBodies(ctx.fakeA.requests)[0];
    const toolNames = (sent?.tools as Json[]).map((t) => (t.type === 'function' ? (t.function as Json).name : (t.custom as Json).name));
    assert.deepEqual(toolNames.sort(), ['apply_patch', 'mcp_fs__read', 'shell']);
    const log = await logLine(ctx.gw, r.headers.get('x-request-id') ?? '');
    assert.match(String(log.warnings), /web_search/);
  });

  test('a request the translation refuses is a 400 in the OpenAI envelope, before any upstream call', async () => {
    const r = await post(ctx.gw, { model: 'gpt-test', input: 'x', tools: [{ type: 'web_search' }], tool_choice: { type: 'web_search_preview' } });
    assert.equal(r.status, 400);
    assertError((await r.json()) as Json, 'tool_choice', 'unsupported_parameter');
    assert.equal(chatBodies(ctx.fakeA.requests).length, 0);
  });
});

describe('/v1/responses through the chat path to an Anthropic backend', () => {
  let ant: FakeAnthropic;
  let gw: TestGateway;
  before(async () => {
    ant = await startFakeAnthropic({ apiKey: ANT_KEY });
    const { startGateway } = await import('./support/gateway.ts');
    gw = await startGateway(`
backends:
  claude: { type: anthropic, base_url: "${ant.url}", api_key: "${ANT_KEY}" }
models:
  claude-test: { targets: [ { backend: claude, model: claude-3-5-haiku-latest } ] }
`);
  });
  after(async () => {
    await gw?.close();
    await ant?.close();
  });

  test('JSON and stream answers come back as Responses', async () => {
    const json = await post(gw, { model: 'claude-test', instructions: 'Be brief.', input: 'ping' }, '');
    assert.equal(json.status, 200);
    const body = (await json.json()) as Json;
    assert.equal(body.model, 'claude-test');
    const text = ((body.output as Json[])[0]?.content as Json[])[0]?.text;
    assert.equal(text, 'echo: ping');

    const stream = await post(gw, { model: 'claude-test', input: 'pong', stream: true }, '');
    assert.equal(stream.status, 200);
    const events = parseSse(await stream.text());
    assert.equal(events.at(-1)?.event, 'response.completed');
    assert.equal(events.filter((e) => e.event === 'response.output_text.delta').map((e) => e.data.delta).join(''), 'echo: pong');
  });
});
