/**
 * Session affinity (`routing.affinity`) end to end: a real gateway over two fake OpenAI-compatible
 * upstreams and a weighted 50/50 split. Each session's requests reach one target while sessions
 * spread over both; a session moves when its target fails and stays where it moved; every way of
 * naming a session works (x-session-id, prompt_cache_key on Chat Completions and Responses, Claude
 * Code's header on Messages, Codex's header, the hash of the system prompt and first user message);
 * a model with affinity off spreads one session's requests.
 *
 * Which target served is read from `x-switchyard-backend`. The split is random, so every "spreads"
 * assertion is over enough draws that chance alone fails it less than once in a hundred thousand runs.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Behaviour } from './support/fake-openai-upstream.ts';
import { upstreamsWithGateway } from './support/suite.ts';

const ctx = upstreamsWithGateway({
  upstreams: { fakeA: {}, fakeB: {} },
  yaml: ({ fakeA, fakeB }) => `
routing:
  retry: { max_retries: 0 }
  # breakers stay closed: a session moves because its pin was dropped, not because its target is skipped
  breaker: { consecutive_failures: 0, min_requests: 100000 }
  affinity: { enabled: true, ttl_seconds: 300 }
backends:
  alpha: { type: openai, base_url: "${fakeA.url}", timeout_ms: 5000 }
  bravo: { type: openai, base_url: "${fakeB.url}", timeout_ms: 5000 }
models:
  split:
    policy: weighted
    targets: [ { backend: alpha, model: split-a, weight: 50 }, { backend: bravo, model: split-b, weight: 50 } ]
  plain:
    policy: weighted
    affinity: { enabled: false }
    targets: [ { backend: alpha, model: plain-a, weight: 50 }, { backend: bravo, model: plain-b, weight: 50 } ]
`,
});

type Json = Record<string, unknown>;

let turn = 0;

/** POST to the gateway; the backend that served it (asserting a 200). */
async function served(path: string, body: Json, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(`${ctx.gw.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  const backend = res.headers.get('x-switchyard-backend');
  assert.ok(backend === 'alpha' || backend === 'bravo', `served by ${String(backend)}`);
  return backend;
}

/** A chat request with a message of its own (never a cache hit, never the same hash as another). */
function chat(model: string, extra: Json = {}): Json {
  return { model, messages: [{ role: 'user', content: `question ${++turn}` }], ...extra };
}

/** `n` requests of one session, one after another: who served each. */
async function session(n: number, send: (i: number) => Promise<string>): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(await send(i));
  return out;
}

const one = (xs: readonly string[]): boolean => xs.every((x) => x === xs[0]);

describe('routing.affinity over a weighted 50/50 split', () => {
  test('x-session-id: every session stays on one target; the sessions spread over both', async () => {
    // 20 sessions: all on one target by chance is 2 in a million
    const runs = await Promise.all(Array.from({ length: 20 }, (_, s) => session(5, () => served('/v1/chat/completions', chat('split'), { 'x-session-id': `sess-${s}` }))));
    for (const [s, r] of runs.entries()) assert.ok(one(r), `session ${s} was served by ${r.join(', ')}`);
    const firsts = new Set(runs.map((r) => r[0]));
    assert.deepEqual([...firsts].sort(), ['alpha', 'bravo'], 'sessions drawn by weight, not all on one target');
    assert.equal(ctx.fakeA.requests.length + ctx.fakeB.requests.length, 100);
  });

  test('a session whose target fails moves to the other target and stays there once the first recovers', async () => {
    const headers = { 'x-session-id': 'moving' };
    const first = await served('/v1/chat/completions', chat('split'), headers);
    const [down, other] = first === 'alpha' ? [ctx.fakeA, 'bravo'] : [ctx.fakeB, 'alpha'];
    down.onModel(first === 'alpha' ? 'split-a' : 'split-b', { kind: 'error', status: 500, message: 'down' });
    const res = await fetch(`${ctx.gw.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(chat('split')) });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-switchyard-backend'), other, 'failed over');
    assert.equal(res.headers.get('x-switchyard-attempts'), '2', 'the pinned target was tried first');
    await res.text();
    down.reset(); // recovered
    const after = await session(12, () => served('/v1/chat/completions', chat('split'), headers));
    assert.deepEqual(after, Array<string>(12).fill(other), 'the session stays on the target it moved to');
  });

  test('streams: a session stays on one target', async () => {
    const runs = await Promise.all(Array.from({ length: 6 }, (_, s) => session(5, () => served('/v1/chat/completions', chat('split', { stream: true }), { 'x-session-id': `stream-${s}` }))));
    for (const r of runs) assert.ok(one(r), r.join(', '));
  });

  test('a stream that fails after its first chunk drops its pin: the session is drawn again', async () => {
    // 16 sessions: none of them drawn onto another target by chance is 1.5 in a hundred thousand
    const ids = Array.from({ length: 16 }, (_, s) => ({ 'x-session-id': `broken-stream-${s}` }));
    const before = await Promise.all(ids.map((h) => served('/v1/chat/completions', chat('split'), h)));
    const broken: Behaviour = { kind: 'stream', chunks: ['par', 'tial'], errorAfter: { after: 1, message: 'upstream broke' } };
    ctx.fakeA.onModel('split-a', broken);
    ctx.fakeB.onModel('split-b', broken);
    await Promise.all(
      ids.map(async (h) => {
        const res = await fetch(`${ctx.gw.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...h }, body: JSON.stringify(chat('split', { stream: true })) });
        assert.equal(res.status, 200);
        assert.match(await res.text(), /"error"/, 'the stream ends with an error event');
      }),
    );
    ctx.fakeA.reset();
    ctx.fakeB.reset();
    const afterwards = await Promise.all(ids.map((h) => served('/v1/chat/completions', chat('split'), h)));
    assert.ok(
      afterwards.some((b, i) => b !== before[i]),
      'some session moved',
    );
  });

  test('prompt_cache_key (Chat Completions) names a session', async () => {
    const runs = await Promise.all(Array.from({ length: 6 }, (_, s) => session(5, () => served('/v1/chat/completions', chat('split', { prompt_cache_key: `pck-${s}` })))));
    for (const r of runs) assert.ok(one(r), r.join(', '));
  });

  test('prompt_cache_key (Responses API) names a session', async () => {
    const runs = await Promise.all(
      Array.from({ length: 6 }, (_, s) => session(5, () => served('/v1/responses', { model: 'split', input: `question ${++turn}`, prompt_cache_key: `resp-${s}`, store: false }))),
    );
    for (const r of runs) assert.ok(one(r), r.join(', '));
  });

  test("Claude Code's x-claude-code-session-id (Messages API) and Codex's session_id name a session", async () => {
    const messages = (s: number): Promise<string[]> =>
      session(5, () =>
        served('/v1/messages', { model: 'split', max_tokens: 50, messages: [{ role: 'user', content: `question ${++turn}` }] }, { 'x-claude-code-session-id': `cc-${s}` }),
      );
    const codex = (s: number): Promise<string[]> => session(5, () => served('/v1/responses', { model: 'split', input: `question ${++turn}`, store: false }, { session_id: `codex-${s}` }));
    const runs = await Promise.all([0, 1, 2, 3].flatMap((s) => [messages(s), codex(s)]));
    for (const r of runs) assert.ok(one(r), r.join(', '));
  });

  test('without a session id: one conversation (same system prompt and first user message) stays on one target', async () => {
    const conversation = (s: number): Promise<string[]> => {
      const history: Json[] = [
        { role: 'system', content: `you are helper ${s}` },
        { role: 'user', content: [{ type: 'text', text: `first question of ${s}` }] },
      ];
      return session(5, async (i) => {
        const b = await served('/v1/chat/completions', { model: 'split', messages: history });
        history.push({ role: 'assistant', content: `answer ${i}` }, { role: 'user', content: `follow-up ${i} of ${s}` });
        return b;
      });
    };
    const runs = await Promise.all(Array.from({ length: 6 }, (_, s) => conversation(s)));
    for (const r of runs) assert.ok(one(r), r.join(', '));
  });

  test('without a session id: a Responses conversation continued by previous_response_id stays on one target', async () => {
    const conversation = async (s: number): Promise<string[]> => {
      const out: string[] = [];
      let previous: string | undefined;
      for (let i = 0; i < 5; i++) {
        const res = await fetch(`${ctx.gw.baseURL}/responses`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'split', instructions: `helper ${s}`, input: i === 0 ? `first question of ${s}` : `follow-up ${i}`, ...(previous ? { previous_response_id: previous } : {}) }),
        });
        const body = (await res.json()) as Json;
        assert.equal(res.status, 200, JSON.stringify(body));
        previous = body.id as string;
        out.push(res.headers.get('x-switchyard-backend') ?? '');
      }
      return out;
    };
    const runs = await Promise.all(Array.from({ length: 6 }, (_, s) => conversation(s)));
    for (const r of runs) assert.ok(one(r), r.join(', '));
  });

  test('affinity off for a model: one session spreads by weight', async () => {
    // 20 draws: all on one target by chance is 2 in a million
    const r = await session(20, () => served('/v1/chat/completions', chat('plain'), { 'x-session-id': 'unpinned' }));
    assert.deepEqual([...new Set(r)].sort(), ['alpha', 'bravo']);
  });
});
