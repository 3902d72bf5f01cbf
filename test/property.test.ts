/**
 * Property-based request fuzzing against a real gateway (a `type: fake` backend and an `openai`
 * backend in front of the shared fake upstream): arbitrary JSON values, mutations of valid chat,
 * completions and embeddings requests (wrong types, missing and unknown fields, unknown content
 * parts, huge strings, deep nesting, lone surrogates, out-of-range numbers) and raw byte bodies.
 *
 * Property: every answer is either a well-formed success (200 with the route's object shape, or a
 * well-formed event stream) or the exact OpenAI error envelope with a 4xx status — never a 5xx,
 * never HTML or plain text. Afterwards the gateway still serves good requests.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';

const BODY_LIMIT = 256 * 1024;

let up: FakeUpstream;
let gw: TestGateway;

before(async () => {
  up = await startFakeOpenAI();
  gw = await startGateway(`
server: { max_body_bytes: ${BODY_LIMIT} }
routing:
  retry: { max_retries: 0 }
  breaker: { consecutive_failures: 0, min_requests: 100000 }
backends:
  demo: { type: fake, embedding_dimensions: 8 }
  up: { type: openai, base_url: "${up.url}", api_key: sk-upstream-test }
models:
  chat: { targets: [ { backend: demo, model: echo } ] }
  embed: { targets: [ { backend: demo, model: e } ] }
  up-chat: { targets: [ { backend: up, model: gpt-4o-mini } ] }
  up-embed: { targets: [ { backend: up, model: text-embedding-3-small } ] }
`);
});

after(async () => {
  await gw.close();
  await up.close();
});

type Route = 'chat' | 'completions' | 'embeddings';
const PATHS: Record<Route, string> = { chat: '/v1/chat/completions', completions: '/v1/completions', embeddings: '/v1/embeddings' };
const SUCCESS_OBJECT: Record<Route, string> = { chat: 'chat.completion', completions: 'text_completion', embeddings: 'list' };

interface Target {
  route: Route;
  model: string;
}

const TARGETS: Target[] = [
  { route: 'chat', model: 'chat' },
  { route: 'chat', model: 'up-chat' },
  { route: 'completions', model: 'chat' },
  { route: 'completions', model: 'up-chat' },
  { route: 'embeddings', model: 'embed' },
  { route: 'embeddings', model: 'up-embed' },
];

function validBody(t: Target): Record<string, unknown> {
  switch (t.route) {
    case 'chat':
      return { model: t.model, messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }] };
    case 'completions':
      return { model: t.model, prompt: 'hi', max_tokens: 8 };
    case 'embeddings':
      return { model: t.model, input: ['hi', 'there'] };
  }
}

const FIELDS: Record<Route, string[]> = {
  chat: ['model', 'messages', 'stream', 'stream_options', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'n', 'stop', 'tools', 'tool_choice', 'response_format', 'logit_bias', 'seed', 'user', 'presence_penalty', 'frequency_penalty', 'logprobs', 'top_logprobs', 'parallel_tool_calls', 'metadata', 'modalities', 'reasoning_effort'],
  completions: ['model', 'prompt', 'stream', 'stream_options', 'max_tokens', 'temperature', 'top_p', 'n', 'stop', 'echo', 'suffix', 'best_of', 'logprobs', 'seed', 'user'],
  embeddings: ['model', 'input', 'encoding_format', 'dimensions', 'user'],
};

// ---------------------------------------------------------------------------
// arbitraries

const loneSurrogates = fc.constantFrom('\ud800', '\udfff', 'a\udbffb', '\udc00\ud800', '😀\ud83d');
const unicodeString = fc.oneof(fc.string({ unit: 'binary', maxLength: 64 }), fc.string({ unit: 'grapheme', maxLength: 64 }), loneSurrogates);
const hugeString = fc
  .tuple(fc.integer({ min: 10_000, max: 120_000 }), fc.constantFrom('a', 'é', '😀', ' ', '\u0000', '\ud800', '<|endoftext|>'))
  .map(([n, c]) => c.repeat(Math.ceil(n / c.length)));
const weirdNumber = fc.oneof(
  fc.constantFrom(0, -0, -1, 1e308, -1e308, 5e-324, 2 ** 53 + 2, -(2 ** 63), 2 ** 31, 0.5, 3, 1e6),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
);

/** Arrays or objects nested `depth` levels deep, around an arbitrary leaf. */
const deepNest = fc
  .tuple(fc.integer({ min: 1, max: 400 }), fc.boolean(), fc.jsonValue({ maxDepth: 1 }))
  .map(([depth, asArray, leaf]) => {
    let v: unknown = leaf;
    for (let i = 0; i < depth; i++) v = asArray ? [v] : { k: v };
    return v;
  });

const contentPart: fc.Arbitrary<unknown> = fc.oneof(
  fc.record({ type: fc.constant('text'), text: fc.oneof(unicodeString, weirdNumber, fc.constant(null)) }),
  fc.record({ type: fc.constant('image_url'), image_url: fc.oneof(fc.record({ url: unicodeString }), unicodeString, fc.jsonValue({ maxDepth: 2 })) }),
  fc.record({ type: fc.constantFrom('video', 'input_audio', 'file', 'refusal', '', 'TEXT', 'text\u0000'), data: fc.jsonValue({ maxDepth: 2 }) }),
  fc.jsonValue({ maxDepth: 2 }),
);

const message: fc.Arbitrary<unknown> = fc.oneof(
  fc.record(
    {
      role: fc.oneof(fc.constantFrom('user', 'system', 'assistant', 'tool', 'developer', 'function', 'root', ''), unicodeString, weirdNumber),
      content: fc.oneof(unicodeString, fc.array(contentPart, { maxLength: 4 }), fc.constant(null), weirdNumber, fc.jsonValue({ maxDepth: 2 })),
      name: unicodeString,
      tool_calls: fc.jsonValue({ maxDepth: 3 }),
      tool_call_id: unicodeString,
      extra: fc.jsonValue({ maxDepth: 2 }),
    },
    { requiredKeys: [] },
  ),
  fc.jsonValue({ maxDepth: 2 }),
);

const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 3, arbitrary: unicodeString },
  { weight: 3, arbitrary: weirdNumber },
  { weight: 1, arbitrary: hugeString },
  { weight: 1, arbitrary: deepNest },
  { weight: 2, arbitrary: fc.array(message, { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.array(contentPart, { maxLength: 4 }) },
);

/** Numbers JSON allows but JavaScript cannot hold (1e400 parses to Infinity). */
const rawNumber = fc.constantFrom('1e400', '-1e400', '1e-400', '123456789012345678901234567890', '-0', '0.0000000000000000001', '1E+2', '-9007199254740993');

type Mutation =
  | { kind: 'set'; field: string; value: unknown }
  | { kind: 'delete'; field: string }
  | { kind: 'message'; index: number; value: unknown }
  | { kind: 'raw-number'; field: string; raw: string }
  | { kind: 'unknown-field'; field: string; value: unknown };

function mutation(route: Route): fc.Arbitrary<Mutation> {
  const known = fc.constantFrom(...FIELDS[route]);
  return fc.oneof(
    { weight: 5, arbitrary: fc.record({ kind: fc.constant('set' as const), field: known, value: anyValue }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), field: fc.constantFrom('model', 'messages', 'prompt', 'input') }) },
    { weight: route === 'chat' ? 4 : 0, arbitrary: fc.record({ kind: fc.constant('message' as const), index: fc.integer({ min: 0, max: 2 }), value: message }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('raw-number' as const), field: known, raw: rawNumber }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('unknown-field' as const), field: fc.oneof(unicodeString, fc.constantFrom('__proto__', 'constructor', 'toString', 'x-extra')), value: anyValue }) },
  );
}

/** The body text of `base` with the mutations applied (in order). */
function applyMutations(base: Record<string, unknown>, muts: Mutation[]): string {
  const body: Record<string, unknown> = structuredClone(base);
  const raw: string[] = [];
  for (const m of muts) {
    switch (m.kind) {
      case 'set':
        body[m.field] = m.value;
        break;
      case 'delete':
        delete body[m.field];
        break;
      case 'message': {
        const msgs = Array.isArray(body.messages) ? [...(body.messages as unknown[])] : [];
        msgs[m.index] = m.value;
        // holes become null in JSON, which is a fine thing to send too
        body.messages = msgs;
        break;
      }
      case 'raw-number':
        delete body[m.field];
        raw.push(`${JSON.stringify(m.field)}:${m.raw}`);
        break;
      case 'unknown-field':
        // defineProperty: a "__proto__" key becomes a real own key, as JSON.parse would make it
        Object.defineProperty(body, m.field, { value: m.value, enumerable: true, writable: true, configurable: true });
        break;
    }
  }
  const text = JSON.stringify(body);
  if (raw.length === 0) return text;
  return text === '{}' ? `{${raw.join(',')}}` : `${text.slice(0, -1)},${raw.join(',')}}`;
}

// ---------------------------------------------------------------------------
// the property

interface Envelope {
  error: { message: string; type: string; param: string | null; code: string | null };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function assertEnvelope(v: unknown, where: string): asserts v is Envelope {
  assert.ok(isObject(v), `${where}: an object`);
  assert.deepEqual(Object.keys(v), ['error'], where);
  const e = v.error;
  assert.ok(isObject(e), `${where}: error is an object`);
  assert.deepEqual(Object.keys(e).sort(), ['code', 'message', 'param', 'type'], where);
  assert.equal(typeof e.message, 'string', where);
  assert.ok((e.message as string).length > 0, where);
  assert.equal(typeof e.type, 'string', where);
  assert.ok(e.param === null || typeof e.param === 'string', `${where}: param`);
  assert.ok(e.code === null || typeof e.code === 'string', `${where}: code`);
  assert.doesNotMatch(e.message as string, /<html|\n\s+at |\.ts:\d+|node_modules|sk-upstream-test/i, where);
}

function assertSuccess(route: Route, body: unknown, where: string): void {
  assert.ok(isObject(body), `${where}: success is an object`);
  assert.equal(body.object, SUCCESS_OBJECT[route], where);
  if (route === 'embeddings') {
    assert.ok(Array.isArray(body.data), `${where}: data[]`);
    for (const d of body.data as unknown[]) {
      assert.ok(isObject(d) && (Array.isArray(d.embedding) || typeof d.embedding === 'string'), `${where}: embedding`);
    }
  } else {
    assert.ok(Array.isArray(body.choices) && body.choices.length > 0, `${where}: choices[]`);
  }
}

function assertStream(route: Route, text: string, where: string): void {
  const datas = text
    .split('\n\n')
    .map((block) =>
      block
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart())
        .join('\n'),
    )
    .filter((d) => d !== '');
  assert.ok(datas.length > 0, `${where}: at least one event`);
  const last = datas.at(-1);
  for (const d of datas.slice(0, -1)) {
    const ev: unknown = JSON.parse(d);
    assert.ok(isObject(ev) && !('error' in ev), `${where}: only the last event may be an error`);
    assert.equal(ev.object, route === 'chat' ? 'chat.completion.chunk' : 'text_completion', where);
  }
  if (last !== '[DONE]') {
    const ev: unknown = JSON.parse(last ?? '');
    assertEnvelope(ev, `${where} (final error event)`);
  }
}

async function send(route: Route, body: string | Uint8Array): Promise<void> {
  const res = await fetch(gw.url + PATHS[route], { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  const text = await res.text();
  const type = res.headers.get('content-type') ?? '';
  const where = `${route} ${res.status} ${text.slice(0, 300)}`;
  assert.ok(res.status < 500, `never a 5xx: ${where}`);
  if (res.status === 200) {
    if (type.startsWith('text/event-stream')) {
      assertStream(route, text, where);
      return;
    }
    assert.equal(type, 'application/json', where);
    assertSuccess(route, JSON.parse(text), where);
    return;
  }
  assert.ok(res.status >= 400 && res.status < 500, `a 4xx: ${where}`);
  assert.equal(type, 'application/json', where);
  assertEnvelope(JSON.parse(text), where);
}

const target = fc.constantFrom(...TARGETS);

async function stillServes(): Promise<void> {
  for (const model of ['chat', 'up-chat']) {
    const res = await fetch(`${gw.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'ping' }] }),
    });
    assert.equal(res.status, 200, model);
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    assert.equal(typeof body.choices[0]?.message.content, 'string');
  }
  const emb = await fetch(`${gw.baseURL}/embeddings`, { method: 'POST', body: JSON.stringify({ model: 'embed', input: 'x' }) });
  assert.equal(emb.status, 200);
}

describe('request fuzzing: every answer is a success or a 4xx envelope', () => {
  it('arbitrary JSON values as the body', async () => {
    await fc.assert(
      fc.asyncProperty(target, fc.jsonValue({ maxDepth: 4 }), async (t, v) => {
        await send(t.route, JSON.stringify(v) ?? 'null');
      }),
      { numRuns: 200 },
    );
    await stillServes();
  });

  it('arbitrary objects around a valid model', async () => {
    await fc.assert(
      fc.asyncProperty(target, fc.dictionary(fc.oneof(fc.constantFrom('messages', 'input', 'prompt', 'stream', 'n', 'max_tokens'), unicodeString), anyValue, { maxKeys: 5 }), async (t, obj) => {
        await send(t.route, JSON.stringify({ ...obj, model: t.model }));
      }),
      { numRuns: 150 },
    );
    await stillServes();
  });

  it('mutations of valid chat, completions and embeddings requests', async () => {
    const arb = target.chain((t) => fc.tuple(fc.constant(t), fc.array(mutation(t.route), { minLength: 1, maxLength: 3 })));
    await fc.assert(
      fc.asyncProperty(arb, async ([t, muts]) => {
        await send(t.route, applyMutations(validBody(t), muts));
      }),
      { numRuns: 300 },
    );
    await stillServes();
  });

  it('regression: an unbounded embeddings "dimensions" is a 400, not an allocation that kills the process', async () => {
    for (const [model, dimensions, input] of [
      ['embed', 169_220_804, 'x'],
      ['up-embed', 2 ** 31, 'x'],
      ['embed', 65536, Array.from({ length: 2048 }, () => 'x')],
    ] as const) {
      const res = await fetch(`${gw.baseURL}/embeddings`, { method: 'POST', body: JSON.stringify({ model, input, dimensions }) });
      const text = await res.text();
      assert.equal(res.status, 400, text);
      const body: unknown = JSON.parse(text);
      assertEnvelope(body, text);
      assert.equal(body.error.param, 'dimensions');
    }
    await stillServes();
  });

  it('random bytes as the body → 400 envelope', async () => {
    await fc.assert(
      fc.asyncProperty(target, fc.uint8Array({ maxLength: 2048 }), async (t, bytes) => {
        const res = await fetch(gw.url + PATHS[t.route], { method: 'POST', body: bytes, headers: { 'content-type': 'application/json' } });
        const text = await res.text();
        assert.equal(res.status, 400, text);
        assert.equal(res.headers.get('content-type'), 'application/json');
        assertEnvelope(JSON.parse(text), text);
      }),
      { numRuns: 200 },
    );
    await stillServes();
  });

  it('a valid request with invalid UTF-8 inside a string → 400, never a U+FFFD prompt', async () => {
    const invalid = fc.oneof(
      fc.constantFrom([0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xf0, 0x28, 0x8c, 0xbc], [0xc0, 0xaf], [0xf8, 0x88, 0x80, 0x80, 0x80]),
      fc.uint8Array({ minLength: 1, maxLength: 16 }).map((b) => [0xff, ...b]),
    );
    await fc.assert(
      fc.asyncProperty(target, fc.string({ maxLength: 20 }), invalid, fc.string({ maxLength: 20 }), async (t, pre, bad, post) => {
        const field = t.route === 'chat' ? '"messages":[{"role":"user","content":"' : t.route === 'completions' ? '"prompt":"' : '"input":"';
        const close = t.route === 'chat' ? '"}]}' : '"}';
        const bytes = Buffer.concat([
          Buffer.from(`{"model":${JSON.stringify(t.model)},${field}${JSON.stringify(pre).slice(1, -1)}`),
          Buffer.from(bad),
          Buffer.from(`${JSON.stringify(post).slice(1, -1)}${close}`),
        ]);
        const res = await fetch(gw.url + PATHS[t.route], { method: 'POST', body: bytes, headers: { 'content-type': 'application/json' } });
        const text = await res.text();
        assert.equal(res.status, 400, text);
        const body: unknown = JSON.parse(text);
        assertEnvelope(body, text);
        assert.match(body.error.message, /UTF-8/);
      }),
      { numRuns: 150 },
    );
    await stillServes();
  });
});
