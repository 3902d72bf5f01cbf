/**
 * The Router alone, wired as server/generations.ts wires it (a Config from YAML, a BackendRegistry,
 * a HealthState) with its clock and randomness injected: fake BaseLLMs that answer or fail on
 * script and move the fake clock by the time they "take", a clock whose sleep records the backoff
 * and returns at once, and an observer that writes down what the metrics would see. No network,
 * no real waits.
 *
 * The attempt deadline inside one call (`timeout_ms`, `first_token_timeout_ms`, the stream idle
 * timeout) is a real timer in attempt.ts, not the Clock: those timeouts are covered end to end
 * (test/failover.test.ts); here a backend reports its timeout as the error it would become.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { unsupportedParameter } from '../backends/anthropic/translate.ts';
import type { BaseLLM, CallContext, Capabilities, Capacity } from '../backends/contract.ts';
import { BackendRegistry } from '../backends/registry.ts';
import { fromUpstreamStatus, upstreamTimeout, upstreamUnreachable } from '../errors/upstream.ts';
import { parseConfig } from '../config/load.ts';
import { errorHeaders, GatewayError, toOpenAIError } from '../errors/gateway-error.ts';
import { ClientAbort, type AbortLike } from '../lib/abort.ts';
import type { ChatCompletion, ChatCompletionChunk, ChatRequest } from '../protocol/chat/schema.ts';
import { ChunkPart } from '../protocol/stream-part.ts';
import { HealthState } from './health-state.ts';
import { Router, type StreamHooks } from './router.ts';
import type { Clock, RouteRequest, RouterObserver } from './types.ts';

class FakeClock implements Clock {
  t = 1_700_000_000_000;
  /** every backoff the router waited, in order */
  readonly waits: number[] = [];
  /** runs during a sleep (a client that goes away while the router waits) */
  onSleep: (() => void) | undefined;

  now(): number {
    return this.t;
  }

  async sleep(ms: number, signal: AbortLike): Promise<void> {
    this.waits.push(ms);
    this.onSleep?.();
    if (signal.aborted) throw new Error('aborted');
    this.t += ms;
  }
}

/** What the next call does: how long it takes on the fake clock, and how it ends. */
interface Step {
  ms?: number;
  fail?: (backend: string) => unknown;
}

type Item = { content: string } | { role: true } | { finish: true } | { fail: (backend: string) => unknown };

interface StreamStep {
  ms?: number;
  /** the stream is refused before it starts (an error status instead of SSE) */
  refuse?: (backend: string) => unknown;
  items?: Item[];
}

class FakeLLM implements BaseLLM {
  readonly type = 'fake' as const;
  capabilities: Capabilities = { chat: true, embeddings: false, completions: false };
  capacity?: () => Capacity | undefined;
  /** the upstream model name of every call, in order */
  readonly calls: string[] = [];
  readonly script: Step[] = [];
  readonly streams: StreamStep[] = [];

  constructor(
    readonly id: string,
    private readonly clock: FakeClock,
  ) {}

  async chat(req: ChatRequest, _ctx: CallContext): Promise<ChatCompletion> {
    this.calls.push(req.model);
    const s = this.script.shift() ?? {};
    this.clock.t += s.ms ?? 0;
    if (s.fail) throw s.fail(this.id);
    return {
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1,
      model: req.model,
      choices: [{ index: 0, message: { role: 'assistant', content: `from ${this.id}`, refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
    };
  }

  async chatStream(req: ChatRequest, _ctx: CallContext): Promise<AsyncIterable<ChunkPart<ChatCompletionChunk>>> {
    this.calls.push(req.model);
    const s = this.streams.shift() ?? { items: [{ role: true }, { content: `from ${this.id}` }, { finish: true }] };
    this.clock.t += s.ms ?? 0;
    if (s.refuse) throw s.refuse(this.id);
    const id = this.id;
    const items = s.items ?? [];
    async function* gen(): AsyncGenerator<ChunkPart<ChatCompletionChunk>> {
      for (const it of items) {
        if ('fail' in it) throw it.fail(id);
        const delta = 'role' in it ? { role: 'assistant' as const, content: '' } : 'content' in it ? { content: it.content } : {};
        const finish = 'finish' in it ? ('stop' as const) : null;
        yield ChunkPart.of<ChatCompletionChunk>({ id: 'c', object: 'chat.completion.chunk', created: 1, model: req.model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
      }
    }
    return gen();
  }
}

const hooks: StreamHooks<ChunkPart<ChatCompletionChunk>> = {
  commits: (p) => p.chunk.choices.some((c) => !!c.delta.content || !!c.finish_reason),
  completes: (p) => p.chunk.choices.some((c) => !!c.finish_reason),
};

const BACKENDS = 'backends:\n  a: { type: fake }\n  b: { type: fake }\n  c: { type: fake }\n';
const ABC = '[ { backend: a, model: a1 }, { backend: b, model: b1 }, { backend: c, model: c1 } ]';

/** Retries with a 100 ms base, a breaker that opens after 3 failures in a row (not by rate). */
function setup(models: string, routing = 'retry: { max_retries: 2, base_delay_ms: 100, max_delay_ms: 1000 }') {
  const yaml = `${BACKENDS}routing:\n  ${routing}\n  breaker: { consecutive_failures: 3, min_requests: 1000, open_ms: 10000, max_open_ms: 60000 }\nmodels:\n${models}`;
  const { config } = parseConfig(yaml, 'test.yaml', {});
  const registry = new BackendRegistry(config, new Set());
  const clock = new FakeClock();
  const llm: Record<string, FakeLLM> = {};
  for (const [name, entry] of registry.all()) {
    const fake = new FakeLLM(name, clock);
    entry.llm = fake;
    llm[name] = fake;
  }
  const events: string[] = [];
  const observer: RouterObserver = {
    attempt: (backend, outcome) => events.push(`attempt ${backend} ${outcome}`),
    retry: (model, backend) => events.push(`retry ${model} ${backend}`),
    failover: (model, from) => events.push(`failover ${model} from ${from}`),
  };
  const rng = { value: 0.5 };
  const router = new Router(config, registry, new HealthState(config.routing.breaker), clock, () => rng.value, observer);
  const a = llm.a as FakeLLM;
  const b = llm.b as FakeLLM;
  const c = llm.c as FakeLLM;
  return { router, registry, clock, events, rng, a, b, c };
}

function req(over: Partial<RouteRequest> = {}): RouteRequest {
  return { publicModel: 'm', op: 'chat', requestId: 'req-1', signal: new ClientAbort(), stream: false, promptTokens: 100, ...over };
}

function chat(router: Router, r: RouteRequest = req()) {
  return router.run(r, (t, ctx) => {
    const llm = t.entry.llm;
    if (!llm.chat) throw new Error('no chat');
    return llm.chat({ model: t.model, messages: [{ role: 'user', content: 'hi' }] }, ctx);
  });
}

function stream(router: Router, r: RouteRequest = req({ stream: true })) {
  return router.runStream(
    r,
    (t, ctx) => {
      const llm = t.entry.llm;
      if (!llm.chatStream) throw new Error('no stream');
      return llm.chatStream({ model: t.model, messages: [{ role: 'user', content: 'hi' }], stream: true }, ctx);
    },
    hooks,
  );
}

/** What a client reading the stream gets: the texts in order, and how it ended. */
async function read(parts: AsyncIterable<ChunkPart<ChatCompletionChunk>>): Promise<{ got: string[]; flushed: number[]; error?: GatewayError }> {
  const got: string[] = [];
  const flushed: number[] = [];
  try {
    for await (const p of parts) {
      const ch = p.chunk.choices[0];
      if (p.flush) flushed.push(got.length);
      got.push(ch?.finish_reason ? `[${ch.finish_reason}]` : ch?.delta.role ? '[role]' : (ch?.delta.content ?? ''));
    }
  } catch (err) {
    assert.ok(err instanceof GatewayError, `a GatewayError, not ${String(err)}`);
    return { got, flushed, error: err };
  }
  return { got, flushed };
}

async function failure(p: Promise<unknown>): Promise<GatewayError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof GatewayError, `a GatewayError, not ${String(err)}`);
    return err;
  }
  return assert.fail('expected the request to fail');
}

const unavailable = (backend: string): GatewayError => fromUpstreamStatus({ backend, status: 503, secrets: [] });
const authFailed = (backend: string): GatewayError => fromUpstreamStatus({ backend, status: 401, secrets: [] });
const order = (router: Router, r: RouteRequest = req()): string[] => router.plan(r).map((t) => t.backend);

describe('plan: attempt order by policy', () => {
  test('fallback keeps configuration order', () => {
    const { router } = setup(`  m: { targets: ${ABC} }\n`);
    assert.deepEqual(order(router), ['a', 'b', 'c']);
  });

  test('weighted draws the first target by weight with the injected rand; the rest follow in order', () => {
    const { router, rng } = setup('  m: { policy: weighted, targets: [ { backend: a, model: a1, weight: 1 }, { backend: b, model: b1, weight: 3 }, { backend: c, model: c1, weight: 0 } ] }\n');
    rng.value = 0.1; // 0.4 of 4: a's share
    assert.deepEqual(order(router), ['a', 'b']);
    rng.value = 0.5; // 2 of 4: b's share
    assert.deepEqual(order(router), ['b', 'a'], 'weight 0 (drained) is left out entirely');
  });

  test('sticky weighted: the same key always draws the same first target, whatever rand says', () => {
    const { router, rng } = setup('  m: { policy: weighted, sticky: true, targets: [ { backend: a, model: a1 }, { backend: b, model: b1 } ] }\n');
    const first = order(router, req({ stickyKey: 'team-x' }))[0];
    for (const v of [0, 0.3, 0.6, 0.99]) {
      rng.value = v;
      assert.equal(order(router, req({ stickyKey: 'team-x' }))[0], first);
    }
  });

  test('preferTarget (session affinity): the pinned target moves first, the rest keep the policy order; a pin outside the plan changes nothing', () => {
    const { router, rng, a } = setup('  m: { policy: weighted, targets: [ { backend: a, model: a1 }, { backend: b, model: b1 }, { backend: c, model: c1, weight: 0 } ] }\n');
    for (const v of [0, 0.3, 0.6, 0.99]) {
      rng.value = v;
      assert.deepEqual(order(router, req({ preferTarget: { backend: 'b', model: 'b1' } })), ['b', 'a']);
      assert.deepEqual(order(router, req({ preferTarget: { backend: 'a', model: 'a1' } })), ['a', 'b']);
    }
    rng.value = 0.99;
    assert.deepEqual(order(router, req({ preferTarget: { backend: 'c', model: 'c1' } })), ['b', 'a'], 'a drained target keeps no sessions');
    assert.deepEqual(order(router, req({ preferTarget: { backend: 'a', model: 'other' } })), ['b', 'a'], 'backend and model must both match');
    a.capacity = () => ({ total: 1, busy: 1 });
    assert.deepEqual(order(router, req({ preferTarget: { backend: 'a', model: 'a1' } })), ['b', 'a'], 'a full local server is not forced first');
  });

  test('cost: cheapest estimated request first, a target without a price last', () => {
    const { router } = setup(
      '  m: { policy: cost, targets: [ { backend: a, model: a1 }, { backend: b, model: b1, price: { input: 10, output: 30 } }, { backend: c, model: c1, price: { input: 1, output: 2 } } ] }\n',
    );
    assert.deepEqual(order(router), ['c', 'b', 'a']);
  });

  test('latency: fastest measured first, an unmeasured target ahead of them (it gets measured)', async () => {
    const { router, a, b } = setup(`  m: { policy: latency, targets: ${ABC} }\n`);
    a.script.push({ ms: 500 });
    b.script.push({ ms: 50 });
    await chat(router, req({ pinBackend: 'a' }));
    await chat(router, req({ pinBackend: 'b' }));
    assert.deepEqual(order(router), ['c', 'b', 'a']);
  });

  test('a full local server moves behind the others (busy, not broken); the least busy goes first', () => {
    const { router, a, b } = setup(`  m: { targets: ${ABC} }\n`);
    a.capacity = () => ({ total: 1, busy: 1 });
    b.capacity = () => ({ total: 4, busy: 1 });
    assert.deepEqual(order(router), ['b', 'c', 'a']);
  });

  test('capability filter: targets that cannot serve the operation are left out; none left is a 400', async () => {
    const { router, a, b, c } = setup(`  m: { targets: ${ABC} }\n`);
    a.capabilities = { chat: false, embeddings: true, completions: false };
    assert.deepEqual(order(router), ['b', 'c']);
    const r = await chat(router);
    assert.equal(r.target.backend, 'b');
    assert.deepEqual(a.calls, []);
    b.capabilities = c.capabilities = a.capabilities;
    const e = await failure(chat(router));
    assert.equal(e.status, 400);
    assert.equal(e.code, 'model_not_supported');
    assert.equal(e.param, 'model');
    const emb = await failure(chat(router, req({ op: 'completions' })));
    assert.equal(emb.code, 'model_not_supported');
    assert.match(emb.message, /legacy completions/);
  });

  test('an unknown model is a 404 model_not_found', async () => {
    const { router } = setup(`  m: { targets: ${ABC} }\n`);
    const e = await failure(chat(router, req({ publicModel: 'nope' })));
    assert.equal(e.status, 404);
    assert.deepEqual(toOpenAIError(e).error, { message: e.message, type: 'invalid_request_error', param: 'model', code: 'model_not_found' });
  });
});

describe('pin (x-switchyard-backend)', () => {
  test('only the pinned backend is tried, even when it fails', async () => {
    const { router, a, b, c } = setup(`  m: { targets: ${ABC} }\n`, 'retry: { max_retries: 0 }');
    const ok = await chat(router, req({ pinBackend: 'b' }));
    assert.equal(ok.target.backend, 'b');
    b.script.push({ fail: unavailable });
    const e = await failure(chat(router, req({ pinBackend: 'b' })));
    assert.equal(e.status, 503);
    assert.deepEqual([a.calls, b.calls, c.calls], [[], ['b1', 'b1'], []]);
  });

  test('a pin the model has no target on is a 400 invalid_pin naming the backends it has', async () => {
    const { router } = setup(`  m: { targets: ${ABC} }\n`);
    const e = await failure(chat(router, req({ pinBackend: 'zz' })));
    assert.equal(e.status, 400);
    assert.equal(e.code, 'invalid_pin');
    assert.equal(e.param, 'x-switchyard-backend');
    assert.match(e.message, /it has: a, b, c/);
  });

  test('a pin on a drained (weight 0) target is a 400 invalid_pin saying so', async () => {
    const { router, b } = setup('  m: { policy: weighted, targets: [ { backend: a, model: a1 }, { backend: b, model: b1, weight: 0 } ] }\n');
    const e = await failure(chat(router, req({ pinBackend: 'b' })));
    assert.equal(e.code, 'invalid_pin');
    assert.match(e.message, /weight 0/);
    assert.deepEqual(b.calls, []);
  });
});

describe('retries and failover', () => {
  test('a retryable error is retried on the same target after backoffMs delays (equal jitter, injected rand)', async () => {
    const { router, clock, events, a, b } = setup(`  m: { targets: ${ABC} }\n`);
    a.script.push({ fail: unavailable }, { fail: (id) => upstreamUnreachable(id, 'connect ECONNREFUSED') });
    const r = await chat(router);
    assert.equal(r.target.backend, 'a');
    assert.equal(r.attempts, 3);
    // retry n waits base·2^(n-1) halved plus rand (0.5) of the other half: 75, then 150
    assert.deepEqual(clock.waits, [75, 150]);
    assert.deepEqual(b.calls, []);
    assert.deepEqual(events, ['attempt a retryable', 'retry m a', 'attempt a retryable', 'retry m a', 'attempt a success']);
  });

  test('backoff is capped by max_delay_ms', async () => {
    const { router, clock, a } = setup(`  m: { targets: ${ABC} }\n`, 'retry: { max_retries: 3, base_delay_ms: 400, max_delay_ms: 500 }');
    for (let i = 0; i < 3; i++) a.script.push({ fail: unavailable });
    await chat(router);
    assert.deepEqual(clock.waits, [300, 375, 375]);
  });

  test("an upstream's retry-after replaces the backoff; one longer than max_retry_wait_ms fails over at once", async () => {
    const { router, clock, a } = setup(`  m: { targets: ${ABC} }\n`, 'retry: { max_retries: 2, base_delay_ms: 100 }\n  max_retry_wait_ms: 5000');
    a.script.push({ fail: (backend) => fromUpstreamStatus({ backend, status: 429, retryAfter: 2, secrets: [] }) });
    const r = await chat(router);
    assert.equal(r.target.backend, 'a');
    assert.deepEqual(clock.waits, [2000]);

    a.script.push({ fail: (backend) => fromUpstreamStatus({ backend, status: 429, retryAfter: 30, secrets: [] }) });
    const r2 = await chat(router);
    assert.equal(r2.target.backend, 'b');
    assert.deepEqual(clock.waits, [2000], 'no wait for a 30 s retry-after');
    assert.deepEqual(a.calls, ['a1', 'a1', 'a1']);
  });

  test('retries spent: fails over to the next target', async () => {
    const { router, clock, events, a, b } = setup(`  m: { targets: ${ABC} }\n`);
    for (let i = 0; i < 3; i++) a.script.push({ fail: unavailable });
    const r = await chat(router);
    assert.equal(r.target.backend, 'b');
    assert.equal(r.attempts, 4);
    assert.deepEqual(a.calls, ['a1', 'a1', 'a1']);
    assert.deepEqual(b.calls, ['b1']);
    assert.deepEqual(clock.waits, [75, 150]);
    assert.deepEqual(events.slice(-3), ['attempt a retryable', 'failover m from a', 'attempt b success']);
  });

  test('a failover disposition (credentials rejected, timeout) goes to the next target without retrying', async () => {
    const { router, clock, events, a, b, c } = setup(`  m: { targets: ${ABC} }\n`);
    a.script.push({ fail: authFailed });
    b.script.push({ fail: (id) => upstreamTimeout(id, 30_000) });
    const r = await chat(router);
    assert.equal(r.target.backend, 'c');
    assert.equal(r.attempts, 3);
    assert.deepEqual([a.calls.length, b.calls.length, c.calls.length], [1, 1, 1]);
    assert.deepEqual(clock.waits, []);
    assert.deepEqual(events, ['attempt a retryable', 'failover m from a', 'attempt b timeout', 'failover m from b', 'attempt c success']);
  });

  test('an error the backend did not classify is an upstream failure: retried, then failed over', async () => {
    const { router, a, b } = setup(`  m: { targets: ${ABC} }\n`, 'retry: { max_retries: 1, base_delay_ms: 10 }');
    a.script.push({ fail: () => new TypeError('boom') }, { fail: () => new TypeError('boom') });
    const r = await chat(router);
    assert.equal(r.target.backend, 'b');
    assert.equal(a.calls.length, 2);
    assert.equal(b.calls.length, 1);
  });

  test('a fatal error (400 unsupported_parameter from a translating backend) returns at once: no retry, no failover, no breaker count', async () => {
    const { router, clock, events, a, b } = setup(`  m: { targets: ${ABC} }\n`);
    for (let i = 0; i < 5; i++) a.script.push({ fail: () => unsupportedParameter('tools[0]', 'is not supported by this backend') });
    for (let i = 0; i < 5; i++) {
      const e = await failure(chat(router));
      assert.equal(e.status, 400);
      assert.deepEqual(toOpenAIError(e).error, { message: e.message, type: 'invalid_request_error', param: 'tools[0]', code: 'unsupported_parameter' });
      const h = errorHeaders(e);
      assert.equal(h['x-switchyard-attempts'], '1');
      assert.equal(h['x-should-retry'], undefined, 'a client error is not "exhausted"');
    }
    assert.deepEqual(b.calls, []);
    assert.deepEqual(clock.waits, []);
    assert.equal(events.filter((e) => e === 'attempt a fatal').length, 5);
    // five fatal errors in a row did not open a's breaker (it opens after 3 failures)
    const ok = await chat(router);
    assert.equal(ok.target.backend, 'a');
  });

  test('every target failing: one error listing every attempt, the last status, x-should-retry: false and the attempt count', async () => {
    const s = setup(`  m: { targets: ${ABC} }\n`, 'retry: { max_retries: 0 }');
    s.a.script.push({ fail: authFailed });
    s.b.script.push({ fail: unavailable });
    s.c.script.push({ fail: (id) => fromUpstreamStatus({ backend: id, status: 500, error: { message: 'kaput' }, secrets: [] }) });
    const e = await failure(chat(s.router));
    assert.equal(e.status, 502);
    assert.equal(e.code, 'upstream_error');
    assert.match(e.message, /^All targets of model 'm' failed: a\/a1 → 502 upstream_auth_failed: .*; b\/b1 → 503 upstream_unavailable: .*; c\/c1 → 502 upstream_error: .*kaput/);
    const h = errorHeaders(e);
    assert.equal(h['x-should-retry'], 'false');
    assert.equal(h['x-switchyard-attempts'], '3');
  });

  test('unconfigured or still-loading targets are skipped; when nothing can serve, 503 says why', async () => {
    const { router, registry, events, a, b } = setup(`  m: { targets: ${ABC} }\n`);
    (registry.get('a') ?? assert.fail()).unconfigured = true;
    (registry.get('b') ?? assert.fail()).status = 'loading';
    const r = await chat(router);
    assert.equal(r.target.backend, 'c');
    assert.equal(r.attempts, 1);
    assert.deepEqual([a.calls, b.calls], [[], []]);
    assert.deepEqual(events, ['failover m from a', 'failover m from b', 'attempt c success']);

    (registry.get('b') ?? assert.fail()).unconfigured = true;
    (registry.get('c') ?? assert.fail()).unconfigured = true;
    const e = await failure(chat(router));
    assert.equal(e.status, 503);
    assert.equal(e.code, 'backend_not_configured');
    assert.equal(errorHeaders(e)['retry-after'], '60');
  });

  test('the client going away during a backoff ends the chain with 499 and no further attempt', async () => {
    const { router, clock, a, b } = setup(`  m: { targets: ${ABC} }\n`);
    const signal = new ClientAbort();
    clock.onSleep = () => signal.abort(new Error('client left'));
    a.script.push({ fail: unavailable });
    const e = await failure(chat(router, req({ signal })));
    assert.equal(e.status, 499);
    assert.equal(e.code, 'client_closed_request');
    assert.equal(errorHeaders(e)['x-should-retry'], undefined);
    assert.deepEqual([a.calls.length, b.calls.length], [1, 0]);
  });
});

describe('circuit breaker', () => {
  test('opens after N failures in a row: the target is skipped, then probed once after its open time on the clock', async () => {
    const { router, clock, a, b } = setup(`  m: { targets: ${ABC} }\n`, 'retry: { max_retries: 0 }');
    for (let i = 0; i < 3; i++) {
      a.script.push({ fail: unavailable });
      assert.equal((await chat(router)).target.backend, 'b');
    }
    // open: a is not called at all
    const skipped = await chat(router);
    assert.equal(skipped.target.backend, 'b');
    assert.equal(skipped.attempts, 1);
    assert.equal(a.calls.length, 3);

    clock.t += 9_999;
    await chat(router);
    assert.equal(a.calls.length, 3, 'still open just before open_ms');

    clock.t += 1;
    const probe = await chat(router);
    assert.equal(probe.target.backend, 'a', 'half-open: one probe goes to a');
    assert.equal(a.calls.length, 4);
    // the probe succeeded: closed again, a serves as first target
    assert.equal((await chat(router)).target.backend, 'a');
    assert.equal(b.calls.length, 5);
  });

  test('half-open lets exactly one probe through while it is under way; the rest go to the next target', async () => {
    const { router, clock, a } = setup(`  m: { targets: ${ABC} }\n`, 'retry: { max_retries: 0 }');
    for (let i = 0; i < 3; i++) {
      a.script.push({ fail: unavailable });
      await chat(router);
    }
    clock.t += 10_000;
    let release = (): void => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    const chatOnce = a.chat.bind(a);
    a.chat = async (q, ctx) => {
      await held;
      return chatOnce(q, ctx);
    };
    const probe = chat(router);
    const others = await Promise.all(Array.from({ length: 5 }, () => chat(router)));
    assert.deepEqual(
      others.map((r) => r.target.backend),
      ['b', 'b', 'b', 'b', 'b'],
    );
    release();
    assert.equal((await probe).target.backend, 'a');
    assert.equal(a.calls.length, 4, 'three failures and one probe');
  });

  test('a failed probe reopens it for twice as long', async () => {
    const { router, clock, a } = setup(`  m: { targets: ${ABC} }\n`, 'retry: { max_retries: 0 }');
    for (let i = 0; i < 4; i++) a.script.push({ fail: unavailable });
    for (let i = 0; i < 3; i++) await chat(router);
    clock.t += 10_000;
    await chat(router); // the probe fails
    assert.equal(a.calls.length, 4);
    clock.t += 10_000;
    await chat(router);
    assert.equal(a.calls.length, 4, 'open for 20 s now');
    clock.t += 10_000;
    assert.equal((await chat(router)).target.backend, 'a');
  });

  test('every breaker open: 503 circuit_open with a retry-after of the soonest reopening', async () => {
    const s = setup('  m: { targets: [ { backend: a, model: a1 } ] }\n', 'retry: { max_retries: 0 }');
    for (let i = 0; i < 3; i++) {
      s.a.script.push({ fail: unavailable });
      await failure(chat(s.router));
    }
    s.clock.t += 2_500;
    const e = await failure(chat(s.router));
    assert.equal(e.status, 503);
    assert.equal(e.code, 'circuit_open');
    assert.equal(errorHeaders(e)['retry-after'], '8');
    assert.equal(errorHeaders(e)['x-switchyard-attempts'], '0');
    assert.equal(s.a.calls.length, 3);
  });
});

describe('deadline: one budget across the whole chain', () => {
  test('retries stop when the budget is spent: 504 deadline_exceeded listing the attempts', async () => {
    const { router, a, b } = setup(`  m: { deadline_ms: 1000, targets: ${ABC} }\n`);
    a.script.push({ ms: 600, fail: unavailable }, { ms: 600, fail: unavailable });
    const e = await failure(chat(router));
    assert.equal(e.status, 504);
    assert.equal(e.code, 'deadline_exceeded');
    assert.equal(e.type, 'timeout_error');
    assert.match(e.message, /within the request deadline of 1000 ms\. Attempts: a\/a1 → 503 upstream_unavailable: .*; a\/a1 → 503 upstream_unavailable: /);
    assert.equal(errorHeaders(e)['x-switchyard-attempts'], '2');
    assert.equal(errorHeaders(e)['x-should-retry'], 'false');
    assert.deepEqual(b.calls, []);
  });

  test('the budget spans targets: time spent on one is gone for the next', async () => {
    const { router, a, b, c } = setup(`  m: { targets: ${ABC} }\n`);
    a.script.push({ ms: 300, fail: authFailed });
    b.script.push({ ms: 300, fail: authFailed });
    const e = await failure(chat(router, req({ deadlineMs: 500 })));
    assert.equal(e.code, 'deadline_exceeded');
    assert.match(e.message, /deadline of 500 ms/, "the client's tighter deadline is the budget");
    assert.deepEqual([a.calls.length, b.calls.length, c.calls.length], [1, 1, 0]);
  });

  test('a backoff that would end past the deadline is not waited: the next target is tried', async () => {
    const { router, clock, a, b } = setup(`  m: { targets: ${ABC} }\n`, 'retry: { max_retries: 2, base_delay_ms: 400, max_delay_ms: 1000 }');
    a.script.push({ ms: 100, fail: unavailable });
    const r = await chat(router, req({ deadlineMs: 350 }));
    assert.equal(r.target.backend, 'b');
    assert.deepEqual(clock.waits, []);
    assert.equal(a.calls.length, 1);
    assert.equal(b.calls.length, 1);
  });
});

describe('streams: the commit point', () => {
  test('a stream refused before it starts fails over; the client sees only the second target', async () => {
    const { router, events, a } = setup(`  m: { targets: ${ABC} }\n`, 'retry: { max_retries: 0 }');
    a.streams.push({ refuse: unavailable });
    const r = await stream(router);
    assert.equal(r.target.backend, 'b');
    const { got, error } = await read(r.result);
    assert.deepEqual(got, ['[role]', 'from b', '[stop]']);
    assert.equal(error, undefined);
    assert.deepEqual(events, ['attempt a retryable', 'failover m from a', 'attempt b success']);
  });

  test('a failure before the first content chunk fails over with nothing of it sent', async () => {
    const { router, a, b } = setup(`  m: { targets: ${ABC} }\n`, 'retry: { max_retries: 0 }');
    a.streams.push({ items: [{ role: true }, { fail: (id) => upstreamUnreachable(id, 'socket hang up') }] });
    const r = await stream(router);
    assert.equal(r.target.backend, 'b');
    assert.equal(r.attempts, 2);
    const { got, flushed } = await read(r.result);
    assert.deepEqual(got, ['[role]', 'from b', '[stop]'], "no role chunk of a's");
    assert.deepEqual(flushed, [1], 'the buffered role chunk and the first content leave together');
    assert.equal(b.calls.length, 1);
  });

  test('a stream that ends before any content (and without a finish) is truncated: failed over', async () => {
    const { router, a } = setup(`  m: { targets: ${ABC} }\n`, 'retry: { max_retries: 0 }');
    a.streams.push({ items: [{ role: true }] });
    const r = await stream(router);
    assert.equal(r.target.backend, 'b');
  });

  test('a failure after the first content chunk ends the stream with an error, never a clean end, and tries nothing else', async () => {
    const { router, a, b } = setup(`  m: { targets: ${ABC} }\n`);
    a.streams.push({ items: [{ role: true }, { content: 'Hel' }, { content: 'lo' }, { fail: (id) => upstreamUnreachable(id, 'socket hang up') }] });
    const r = await stream(router);
    assert.equal(r.target.backend, 'a');
    const { got, error } = await read(r.result);
    assert.deepEqual(got, ['[role]', 'Hel', 'lo']);
    assert.equal(error?.code, 'upstream_unreachable');
    assert.equal(error?.status, 502);
    assert.deepEqual(b.calls, []);
  });

  test('a stream that stops after content without a finish_reason ends with upstream_stream_truncated', async () => {
    const { router, a, b } = setup(`  m: { targets: ${ABC} }\n`);
    a.streams.push({ items: [{ role: true }, { content: 'Hel' }] });
    const r = await stream(router);
    const { got, error } = await read(r.result);
    assert.deepEqual(got, ['[role]', 'Hel']);
    assert.equal(error?.code, 'upstream_stream_truncated');
    assert.deepEqual(b.calls, []);
  });

  test('failures after the commit point count against the breaker', async () => {
    const { router, a } = setup(`  m: { targets: ${ABC} }\n`);
    for (let i = 0; i < 3; i++) {
      a.streams.push({ items: [{ role: true }, { content: 'x' }, { fail: (id) => upstreamUnreachable(id, 'reset') }] });
      const r = await stream(router);
      assert.equal(r.target.backend, 'a');
      assert.ok((await read(r.result)).error);
    }
    const next = await stream(router);
    assert.equal(next.target.backend, 'b', 'a is open after three broken streams');
    await read(next.result);
  });

  test('a fatal error opening the stream returns at once', async () => {
    const { router, a, b } = setup(`  m: { targets: ${ABC} }\n`);
    a.streams.push({ refuse: () => unsupportedParameter('tools[0]', 'is not supported') });
    const e = await failure(stream(router));
    assert.equal(e.status, 400);
    assert.equal(e.code, 'unsupported_parameter');
    assert.deepEqual([a.calls.length, b.calls.length], [1, 0]);
  });
});
