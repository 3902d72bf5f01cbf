/**
 * End-to-end tests of the routing engine (issue 4) through a real gateway and fault-injecting fake
 * OpenAI-compatible upstreams, with retries and the circuit breaker switched ON (failover.test.ts
 * and streaming.test.ts run with both off): retries of the same target and their backoff, the
 * breaker's open / half-open / closed cycle, the weighted / sticky / cost / latency policies,
 * per-request control headers (pin, deadline), the one error when everything fails, and streams
 * (failover before the commit point, an error after it, the time-to-first-token timeout).
 *
 * Timing assertions are deliberately loose (the machine is noisy): lower bounds where a wait must
 * have happened, generous upper bounds only where "at once" must be told apart from a long wait.
 * Breaker state is per (backend, upstream model), so tests that open breakers use their own
 * upstream model names, and each describe has its own gateway and fakes.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import type { Behaviour } from './support/fake-openai-upstream.ts';
import type { TestGateway } from './support/gateway.ts';
import { upstreamsWithGateway } from './support/suite.ts';

const KEY_A = 'sk-test-a-secret';
const KEY_B = 'sk-test-b-secret';
const KEY_C = 'sk-test-c-secret';

const err500: Behaviour = { kind: 'error', status: 500, message: 'internal failure' };
const err503: Behaviour = { kind: 'error', status: 503, message: 'overloaded' };

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
  /** wall-clock ms from sending the request to having the whole body */
  ms: number;
}

/** Raw POST /v1/chat/completions, for when the headers matter. */
async function post(gw: TestGateway, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Reply> {
  const t0 = performance.now();
  const res = await fetch(`${gw.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], ...body }),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json, ms: performance.now() - t0 };
}

/** The OpenAI error envelope's `error` object. */
function errorOf(r: Reply): { message: string; type: string; param: unknown; code: unknown } {
  assert.ok(isRecord(r.json) && isRecord(r.json['error']), `an OpenAI error envelope, got ${r.status} ${r.text}`);
  const e = r.json['error'];
  assert.equal(typeof e['message'], 'string');
  assert.equal(typeof e['type'], 'string');
  return { message: e['message'] as string, type: e['type'] as string, param: e['param'], code: e['code'] };
}

function sdk(gw: TestGateway, apiKey = 'unused'): OpenAI {
  return new OpenAI({ baseURL: gw.baseURL, apiKey, maxRetries: 0 });
}

interface Served {
  content: string;
  backend: string | null;
  attempts: string | null;
}

/** One non-streaming chat completion through the SDK. */
async function ask(client: OpenAI, model: string, headers?: Record<string, string>): Promise<Served> {
  const { data, response } = await client.chat.completions
    .create({ model, messages: [{ role: 'user', content: 'hi' }] }, headers ? { headers } : undefined)
    .withResponse();
  return {
    content: data.choices[0]?.message.content ?? '',
    backend: response.headers.get('x-switchyard-backend'),
    attempts: response.headers.get('x-switchyard-attempts'),
  };
}

/** One streaming chat completion through the SDK, read to the end. */
async function askStream(client: OpenAI, model: string): Promise<Served> {
  const { data: stream, response } = await client.chat.completions
    .create({ model, messages: [{ role: 'user', content: 'hi' }], stream: true })
    .withResponse();
  let content = '';
  for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? '';
  return { content, backend: response.headers.get('x-switchyard-backend'), attempts: response.headers.get('x-switchyard-attempts') };
}

function share<T>(xs: readonly T[], x: T): number {
  return xs.filter((v) => v === x).length / xs.length;
}

// ---------------------------------------------------------------------------------------------

describe('retries of the same target, deadlines, pins and the all-failed error', () => {
  const ctx = upstreamsWithGateway({
    upstreams: { fakeA: { apiKey: KEY_A }, fakeB: { apiKey: KEY_B } },
    yaml: ({ fakeA, fakeB }) => `
# Retries ON with a short backoff; the breaker is off here (it has its own describe below).
routing:
  retry: { max_retries: 2, base_delay_ms: 20, max_delay_ms: 40 }
  max_retry_wait_ms: 1500
  breaker: { consecutive_failures: 0, min_requests: 1000000 }
backends:
  alpha: { type: openai, base_url: "${fakeA.url}", api_key: "${KEY_A}", timeout_ms: 5000 }
  bravo: { type: openai, base_url: "${fakeB.url}", api_key: "${KEY_B}", timeout_ms: 5000 }
  patient: { type: openai, base_url: "${fakeA.url}", api_key: "${KEY_A}", timeout_ms: 20000 }
models:
  m: { targets: [ { backend: alpha, model: alpha-model }, { backend: bravo, model: bravo-model } ] }
  no-retry:
    retry: { max_retries: 0 }
    targets: [ { backend: alpha, model: alpha-model }, { backend: bravo, model: bravo-model } ]
  one-retry:
    retry: { max_retries: 1, base_delay_ms: 20, max_delay_ms: 40 }
    targets: [ { backend: alpha, model: alpha-model }, { backend: bravo, model: bravo-model } ]
  slow: { targets: [ { backend: patient, model: slow-model } ] }
`,
    extras: ({ gw }) => ({ client: sdk(gw) }),
  });

  describe('retries', () => {
    test('503 once, then OK → served by the same target on its second attempt', async () => {
      ctx.fakeA.enqueue(err503);
      const r = await ask(ctx.client, 'm');
      assert.equal(r.content, 'Hello from alpha-model');
      assert.equal(r.backend, 'alpha');
      assert.equal(r.attempts, '2');
      assert.equal(ctx.fakeA.requests.length, 2, 'alpha saw the first try and the retry');
      assert.equal(ctx.fakeB.requests.length, 0, 'no failover');
    });

    test('with retry.max_retries: 0 on the model → fails over instead', async () => {
      ctx.fakeA.enqueue(err503);
      const r = await ask(ctx.client, 'no-retry');
      assert.equal(r.content, 'Hello from bravo-model');
      assert.equal(r.backend, 'bravo');
      assert.equal(r.attempts, '2');
      assert.equal(ctx.fakeA.requests.length, 1);
      assert.equal(ctx.fakeB.requests.length, 1);
    });

    test('the backoff honours retry-after-ms from the upstream', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 503, message: 'busy', headers: { 'retry-after-ms': '300' } });
      const r = await ask(ctx.client, 'm');
      assert.equal(r.backend, 'alpha');
      assert.equal(r.attempts, '2');
      assert.equal(ctx.fakeA.requests.length, 2);
      // (arrival times as the fake recorded them: a poll from here could miss one on a busy machine)
      const [first, second] = ctx.fakeA.requests.map((q) => q.at);
      assert.ok(first !== undefined && second !== undefined, `two arrivals, got ${ctx.fakeA.requests.length}`);
      // the configured backoff is ≤ 40 ms, so a gap this long can only come from retry-after-ms
      assert.ok(second - first >= 250, `second request ${Math.round(second - first)} ms after the first, expected ≥ ~300`);
    });

    test('a retry-after longer than routing.max_retry_wait_ms moves to the next target at once', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 503, message: 'come back later', headers: { 'retry-after': '30' } });
      const t0 = performance.now();
      const r = await ask(ctx.client, 'm');
      const ms = performance.now() - t0;
      assert.equal(r.backend, 'bravo');
      assert.equal(r.attempts, '2');
      assert.equal(ctx.fakeA.requests.length, 1, 'alpha was not retried');
      assert.ok(ms < 1500, `answered after ${Math.round(ms)} ms; it must not wait for retry-after (30 s) nor max_retry_wait_ms`);
    });

    test('a 429 with a short retry-after is retried on the same target', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 429, message: 'slow down', headers: { 'retry-after-ms': '50' } });
      const r = await ask(ctx.client, 'm');
      assert.equal(r.backend, 'alpha');
      assert.equal(r.attempts, '2');
      assert.equal(ctx.fakeB.requests.length, 0);
    });

    test('a client-fault 400 → no retry, no failover, 1 attempt', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 400, message: 'bad value for temperature', param: 'temperature', code: 'invalid_value' });
      const r = await post(ctx.gw, { model: 'm' });
      assert.equal(r.status, 400);
      const e = errorOf(r);
      assert.equal(e.message, 'bad value for temperature');
      assert.equal(e.param, 'temperature');
      assert.equal(r.headers.get('x-switchyard-attempts'), '1');
      assert.equal(ctx.fakeA.requests.length, 1);
      assert.equal(ctx.fakeB.requests.length, 0);
    });
  });

  describe('per-request control headers', () => {
    test('x-switchyard-backend pins the request to that backend even though another is first', async () => {
      const r = await ask(ctx.client, 'm', { 'x-switchyard-backend': 'bravo' });
      assert.equal(r.backend, 'bravo');
      assert.equal(r.content, 'Hello from bravo-model');
      assert.equal(r.attempts, '1');
      assert.equal(ctx.fakeA.requests.length, 0);
    });

    test('a pinned target is not failed over away from', async () => {
      ctx.fakeB.enqueue(err500, err500, err500);
      const r = await post(ctx.gw, { model: 'm' }, { 'x-switchyard-backend': 'bravo' });
      assert.equal(r.status, 502, r.text);
      assert.equal(r.headers.get('x-switchyard-attempts'), '3', 'one try and two retries, all on bravo');
      assert.equal(ctx.fakeA.requests.length, 0);
      assert.equal(ctx.fakeB.requests.length, 3);
    });

    for (const pin of ['patient', 'no-such-backend']) {
      test(`a pin to a backend the model has no target on ("${pin}") → 400 invalid_pin`, async () => {
        await assert.rejects(ask(ctx.client, 'm', { 'x-switchyard-backend': pin }), (err: unknown) => {
          assert.ok(err instanceof OpenAI.BadRequestError, `got ${String(err)}`);
          assert.equal(err.status, 400);
          assert.equal(err.code, 'invalid_pin');
          assert.equal(err.param, 'x-switchyard-backend');
          return true;
        });
        assert.equal(ctx.fakeA.requests.length + ctx.fakeB.requests.length, 0, 'no upstream call');
      });
    }

    test('x-switchyard-deadline-ms bounds a request to a hanging upstream long before timeout_ms', async () => {
      ctx.fakeA.enqueue({ kind: 'hang' });
      const r = await post(ctx.gw, { model: 'slow' }, { 'x-switchyard-deadline-ms': '300' });
      assert.equal(r.status, 504, r.text);
      const e = errorOf(r);
      assert.ok(e.code === 'deadline_exceeded' || e.code === 'upstream_timeout', `code ${String(e.code)}`);
      assert.ok(r.ms >= 250, `gave up after ${Math.round(r.ms)} ms, before the 300 ms deadline`);
      assert.ok(r.ms < 5000, `gave up after ${Math.round(r.ms)} ms; timeout_ms is 20000, the deadline 300`);
      assert.equal(ctx.fakeA.requests.length, 1);
    });

    test("the SDK's x-stainless-timeout (seconds) caps a longer x-switchyard-deadline-ms", async () => {
      ctx.fakeA.enqueue({ kind: 'hang' });
      const r = await post(ctx.gw, { model: 'slow' }, { 'x-switchyard-deadline-ms': '60000', 'x-stainless-timeout': '1' });
      assert.equal(r.status, 504, r.text);
      assert.ok(r.ms >= 800, `gave up after ${Math.round(r.ms)} ms, before the 1 s cap`);
      assert.ok(r.ms < 8000, `gave up after ${Math.round(r.ms)} ms; the cap is 1 s`);
    });

    for (const bad of ['soon', '0', '-5']) {
      test(`an invalid x-switchyard-deadline-ms ("${bad}") → 400`, async () => {
        const r = await post(ctx.gw, { model: 'm' }, { 'x-switchyard-deadline-ms': bad });
        assert.equal(r.status, 400, r.text);
        const e = errorOf(r);
        assert.equal(e.type, 'invalid_request_error');
        assert.equal(e.param, 'x-switchyard-deadline-ms');
        assert.equal(ctx.fakeA.requests.length + ctx.fakeB.requests.length, 0);
      });
    }
  });

  describe('when every target fails', () => {
    test('one error listing every attempt, the last status, x-should-retry: false, attempts = upstream calls', async () => {
      ctx.fakeA.enqueue(err503, err503);
      ctx.fakeB.enqueue(err500, err500);
      const r = await post(ctx.gw, { model: 'one-retry' });
      const calls = ctx.fakeA.requests.length + ctx.fakeB.requests.length;
      assert.equal(calls, 4, 'two tries on each target');
      // alpha answered 503 (→ 503), bravo 500 (→ 502): the status is the last one's
      assert.equal(r.status, 502, r.text);
      const e = errorOf(r);
      assert.match(e.message, /alpha/);
      assert.match(e.message, /bravo/);
      assert.equal(r.headers.get('x-should-retry'), 'false');
      assert.equal(r.headers.get('x-switchyard-attempts'), String(calls));
      assert.ok(!r.text.includes(KEY_A) && !r.text.includes(KEY_B), 'no upstream key in the error');
    });

    test('the SDK sees the same as an APIError with status and headers', async () => {
      ctx.fakeA.enqueue(err500, err500);
      ctx.fakeB.enqueue(err503, err503);
      await assert.rejects(ask(ctx.client, 'one-retry'), (err: unknown) => {
        assert.ok(err instanceof OpenAI.APIError, `got ${String(err)}`);
        assert.equal(err.status, 503);
        assert.match(err.message, /alpha/);
        assert.match(err.message, /bravo/);
        assert.equal(err.headers?.get('x-should-retry'), 'false');
        assert.equal(err.headers?.get('x-switchyard-attempts'), '4');
        return true;
      });
    });
  });

  describe('streams', () => {
    test('503 twice before anything was sent → retried on the same target; the client sees only clean content', async () => {
      ctx.fakeA.enqueue(err503, err503);
      const r = await askStream(ctx.client, 'm');
      assert.equal(r.content, 'Hello from alpha-model');
      assert.equal(r.backend, 'alpha');
      assert.equal(r.attempts, '3');
      assert.equal(ctx.fakeA.requests.length, 3);
      assert.equal(ctx.fakeB.requests.length, 0);
    });

    test('a stream that dies after its role chunk, before any content, is retried with nothing sent', async () => {
      ctx.fakeA.enqueue({ kind: 'stream', dropAfter: 0 });
      const r = await askStream(ctx.client, 'm');
      assert.equal(r.content, 'Hello from alpha-model');
      assert.equal(r.backend, 'alpha');
      assert.equal(r.attempts, '2');
      assert.equal(ctx.fakeA.requests.length, 2);
    });

    test('503 twice with one retry allowed → fails over; the raw SSE body is clean and ends with [DONE]', async () => {
      ctx.fakeA.enqueue(err503, err503);
      const r = await post(ctx.gw, { model: 'one-retry', stream: true });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('x-switchyard-backend'), 'bravo');
      assert.equal(r.headers.get('x-switchyard-attempts'), '3');
      const events = r.text
        .split('\n\n')
        .filter((s) => s !== '')
        .map((s) => {
          assert.match(s, /^data: /);
          return s.slice('data: '.length);
        });
      assert.equal(events[events.length - 1], '[DONE]');
      let content = '';
      for (const data of events.slice(0, -1)) {
        const chunk: unknown = JSON.parse(data);
        assert.ok(isRecord(chunk) && !('error' in chunk), `no error event: ${data}`);
        const choices = chunk['choices'];
        assert.ok(Array.isArray(choices));
        const ch: unknown = choices[0];
        if (isRecord(ch) && isRecord(ch['delta']) && typeof ch['delta']['content'] === 'string') content += ch['delta']['content'];
      }
      assert.equal(content, 'Hello from bravo-model');
      assert.equal(ctx.fakeA.requests.length, 2);
    });
  });
});

// ---------------------------------------------------------------------------------------------

describe('circuit breaker', () => {
  // Breaker state is per (backend, upstream model): every test uses its own model names.
  const model = (name: string): string =>
    `  ${name}: { targets: [ { backend: alpha, model: ${name}-a }, { backend: bravo, model: ${name}-b } ] }`;

  const ctx = upstreamsWithGateway({
    upstreams: { fakeA: { apiKey: KEY_A }, fakeB: { apiKey: KEY_B } },
    yaml: ({ fakeA, fakeB }) => `
routing:
  breaker: { consecutive_failures: 2, open_ms: 500, max_open_ms: 2000, min_requests: 100 }
  retry: { max_retries: 0 }
backends:
  alpha: { type: openai, base_url: "${fakeA.url}", api_key: "${KEY_A}", timeout_ms: 5000 }
  bravo: { type: openai, base_url: "${fakeB.url}", api_key: "${KEY_B}", timeout_ms: 5000 }
models:
${['opens', 'half-open', 'reopen', 'client-fault', 'all-open'].map(model).join('\n')}
`,
    extras: ({ gw }) => ({ client: sdk(gw) }),
  });

  /** Two failures on alpha, each failed over to bravo: alpha's breaker is open afterwards. */
  async function openAlpha(m: string): Promise<void> {
    ctx.fakeA.enqueue(err500, err500);
    for (let i = 0; i < 2; i++) {
      const r = await ask(ctx.client, m);
      assert.equal(r.backend, 'bravo');
      assert.equal(r.attempts, '2');
    }
    assert.equal(ctx.fakeA.requests.length, 2);
  }

  test('two failures open it: alpha gets nothing while open; after open_ms a probe goes through and its success closes it', async () => {
    await openAlpha('opens');
    for (let i = 0; i < 3; i++) {
      const r = await ask(ctx.client, 'opens');
      assert.equal(r.backend, 'bravo');
      assert.equal(r.attempts, '1', 'an open target is skipped, not attempted');
    }
    assert.equal(ctx.fakeA.requests.length, 2, 'alpha received nothing while its breaker was open');

    await sleep(700);
    const probe = await ask(ctx.client, 'opens');
    assert.equal(probe.backend, 'alpha', 'the half-open probe went to alpha');
    assert.equal(ctx.fakeA.requests.length, 3);
    for (let i = 0; i < 3; i++) assert.equal((await ask(ctx.client, 'opens')).backend, 'alpha', 'closed again: traffic is back on alpha');
    assert.equal(ctx.fakeA.requests.length, 6);
  });

  test('client-fault 400s never open it', async () => {
    ctx.fakeA.enqueue(
      { kind: 'error', status: 400, message: 'bad request 1' },
      { kind: 'error', status: 400, message: 'bad request 2' },
      { kind: 'error', status: 400, message: 'bad request 3' },
    );
    for (let i = 0; i < 3; i++) {
      const r = await post(ctx.gw, { model: 'client-fault' });
      assert.equal(r.status, 400);
      assert.equal(r.headers.get('x-switchyard-attempts'), '1');
    }
    const r = await ask(ctx.client, 'client-fault');
    assert.equal(r.backend, 'alpha', 'still closed after three 400s');
    assert.equal(ctx.fakeA.requests.length, 4);
    assert.equal(ctx.fakeB.requests.length, 0);
  });

  test('every target open → 503 circuit_open with retry-after, at once and without an upstream call', async () => {
    ctx.fakeA.enqueue(err500, err500);
    ctx.fakeB.enqueue(err500, err500);
    for (let i = 0; i < 2; i++) {
      const r = await post(ctx.gw, { model: 'all-open' });
      assert.equal(r.status, 502, r.text);
      assert.equal(r.headers.get('x-switchyard-attempts'), '2');
    }
    const calls = ctx.fakeA.requests.length + ctx.fakeB.requests.length;
    assert.equal(calls, 4);

    const r = await post(ctx.gw, { model: 'all-open' });
    assert.equal(r.status, 503, r.text);
    const e = errorOf(r);
    assert.equal(e.code, 'circuit_open');
    const ra = Number(r.headers.get('retry-after'));
    assert.ok(Number.isInteger(ra) && ra >= 1, `retry-after ${String(r.headers.get('retry-after'))}`);
    assert.equal(ctx.fakeA.requests.length + ctx.fakeB.requests.length, calls, 'no upstream call');
    assert.ok(r.ms < 1000, `answered in ${Math.round(r.ms)} ms`);
  });
});

// ---------------------------------------------------------------------------------------------

describe('policies', () => {
  const GW_KEYS = ['team-1', 'team-2', 'team-3', 'team-4', 'team-5', 'team-6'];
  const gwKey = (name: string): string => `gw-key-${name}-0123456789`;

  const ctx = upstreamsWithGateway({
    upstreams: { fakeA: { apiKey: KEY_A }, fakeB: { apiKey: KEY_B }, fakeC: { apiKey: KEY_C } },
    yaml: ({ fakeA, fakeB, fakeC }) => `
keys:
${GW_KEYS.map((k) => `  - { name: ${k}, key: "${gwKey(k)}" }`).join('\n')}
routing:
  retry: { max_retries: 0 }
  explore_rate: 0.25
backends:
  alpha: { type: openai, base_url: "${fakeA.url}", api_key: "${KEY_A}", timeout_ms: 5000 }
  bravo: { type: openai, base_url: "${fakeB.url}", api_key: "${KEY_B}", timeout_ms: 5000 }
  charlie: { type: openai, base_url: "${fakeC.url}", api_key: "${KEY_C}", timeout_ms: 5000 }
models:
  weighted:
    policy: weighted
    targets: [ { backend: alpha, model: w-a, weight: 90 }, { backend: bravo, model: w-b, weight: 10 } ]
  drained:
    policy: weighted
    targets: [ { backend: alpha, model: d-a, weight: 1 }, { backend: bravo, model: d-b, weight: 0 } ]
  sticky:
    policy: weighted
    sticky: true
    targets: [ { backend: alpha, model: s-a }, { backend: bravo, model: s-b } ]
  unsticky:
    policy: weighted
    targets: [ { backend: alpha, model: u-a }, { backend: bravo, model: u-b } ]
  cost:
    policy: cost
    targets:
      - { backend: alpha, model: cost-a }
      - { backend: bravo, model: cost-b, price: { input: 2, output: 8 } }
      - { backend: charlie, model: cost-c, price: { input: 0.1, output: 0.4 } }
  latency:
    policy: latency
    targets: [ { backend: alpha, model: lat-slow }, { backend: bravo, model: lat-fast } ]
`,
  });

  const client = (key = 'team-1'): OpenAI => sdk(ctx.gw, gwKey(key));

  /** `n` requests, `batch` at a time; the serving backend of each. */
  async function served(c: OpenAI, model: string, n: number, batch = 20): Promise<Array<string | null>> {
    const out: Array<string | null> = [];
    for (let i = 0; i < n; i += batch) {
      const rs = await Promise.all(Array.from({ length: Math.min(batch, n - i) }, () => ask(c, model)));
      out.push(...rs.map((r) => r.backend));
    }
    return out;
  }

  test('weighted 90/10: about nine in ten requests go to the heavy target', async () => {
    const backends = await served(client(), 'weighted', 200);
    const a = share(backends, 'alpha');
    assert.ok(a >= 0.75 && a <= 0.98, `alpha served ${(a * 100).toFixed(1)} % (expected ~90 %)`);
    assert.ok(backends.every((b) => b === 'alpha' || b === 'bravo'));
    assert.equal(ctx.fakeA.requests.length + ctx.fakeB.requests.length, 200, 'no failover, one call each');
  });

  test('weighted: a target with weight 0 gets nothing', async () => {
    const backends = await served(client(), 'drained', 50);
    assert.ok(backends.every((b) => b === 'alpha'), `all on alpha, got ${backends.join(',')}`);
    assert.equal(ctx.fakeB.requests.length, 0);
  });

  test('weighted: a pin to a drained (weight 0) target → 400 invalid_pin, not served', async () => {
    await assert.rejects(ask(client(), 'drained', { 'x-switchyard-backend': 'bravo' }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError, `got ${String(err)}`);
      assert.equal(err.code, 'invalid_pin');
      assert.equal(err.param, 'x-switchyard-backend');
      assert.match(err.message, /weight 0/);
      return true;
    });
    assert.equal(ctx.fakeB.requests.length, 0);
    assert.equal((await ask(client(), 'drained', { 'x-switchyard-backend': 'alpha' })).backend, 'alpha', 'a pin to the live target works');
  });

  test('sticky: the same gateway key always draws the same target', async () => {
    const byKey = new Map<string, Set<string | null>>();
    await Promise.all(
      GW_KEYS.map(async (k) => {
        byKey.set(k, new Set(await served(client(k), 'sticky', 30, 10)));
      }),
    );
    for (const [k, set] of byKey) assert.equal(set.size, 1, `key ${k} was served by ${[...set].join(' and ')}`);
  });

  test('not sticky: the same key is spread over both targets (the control for the test above)', async () => {
    const backends = new Set(await served(client(), 'unsticky', 30, 10));
    assert.deepEqual([...backends].sort(), ['alpha', 'bravo']);
  });

  test('cost: the cheapest target serves; when it fails the next cheapest; a target without price goes last', async () => {
    const cheapest = await ask(client(), 'cost');
    assert.equal(cheapest.backend, 'charlie', 'charlie is the cheapest, although listed last');
    assert.equal(cheapest.attempts, '1');

    ctx.fakeC.enqueue(err500);
    const next = await ask(client(), 'cost');
    assert.equal(next.backend, 'bravo');
    assert.equal(next.attempts, '2');

    ctx.fakeC.enqueue(err500);
    ctx.fakeB.enqueue(err500);
    const last = await ask(client(), 'cost');
    assert.equal(last.backend, 'alpha', 'the unpriced target is the last resort, although listed first');
    assert.equal(last.attempts, '3');
    assert.equal(ctx.fakeA.requests.length, 1);
  });

});

// ---------------------------------------------------------------------------------------------

describe('streams with the breaker on', () => {
  const ctx = upstreamsWithGateway({
    upstreams: { fakeA: { apiKey: KEY_A }, fakeB: { apiKey: KEY_B } },
    yaml: ({ fakeA, fakeB }) => `
routing:
  breaker: { consecutive_failures: 1, open_ms: 30000, min_requests: 100 }
  retry: { max_retries: 1, base_delay_ms: 20, max_delay_ms: 40 }
backends:
  alpha: { type: openai, base_url: "${fakeA.url}", api_key: "${KEY_A}", timeout_ms: 5000 }
  bravo: { type: openai, base_url: "${fakeB.url}", api_key: "${KEY_B}", timeout_ms: 5000 }
models:
  cut: { targets: [ { backend: alpha, model: cut-a }, { backend: bravo, model: cut-b } ] }
`,
    extras: ({ gw }) => ({ client: sdk(gw) }),
  });

  test('a stream cut after its first content chunk is an error for the client and a failure for the breaker', async () => {
    ctx.fakeA.enqueue({ kind: 'stream', dropAfter: 1 });
    const stream = await ctx.client.chat.completions.create({ model: 'cut', messages: [{ role: 'user', content: 'hi' }], stream: true });
    let content = '';
    await assert.rejects(
      (async () => {
        for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? '';
      })(),
      (err: unknown) => {
        // the gateway's final `data: {"error":…}` event, raised by the SDK
        assert.ok(err instanceof OpenAI.APIError, `got ${String(err)}`);
        assert.match(err.message, /alpha/);
        return true;
      },
      'the SDK iteration throws instead of ending cleanly',
    );
    assert.equal(content, 'Hello ', 'the client got what was sent before the cut, and nothing from elsewhere');
    assert.equal(ctx.fakeA.requests.length, 1, 'committed: not retried');
    assert.equal(ctx.fakeB.requests.length, 0, 'committed: no failover');

    // consecutive_failures: 1 → alpha's breaker is now open and the next request skips it
    const next = await askStream(ctx.client, 'cut');
    assert.equal(next.backend, 'bravo');
    assert.equal(next.attempts, '1', 'alpha was skipped, not attempted');
    assert.equal(next.content, 'Hello from cut-b');
    assert.equal(ctx.fakeA.requests.length, 1);
  });
});

// ---------------------------------------------------------------------------------------------

describe('time-to-first-token timeout', () => {
  const ctx = upstreamsWithGateway({
    upstreams: { fakeA: { apiKey: KEY_A }, fakeB: { apiKey: KEY_B } },
    yaml: ({ fakeA, fakeB }) => `
# The breaker is off so the stream test's timeout does not keep the non-stream test away from alpha.
routing:
  breaker: { consecutive_failures: 0, min_requests: 1000000 }
  retry: { max_retries: 0 }
backends:
  alpha: { type: openai, base_url: "${fakeA.url}", api_key: "${KEY_A}", timeout_ms: 2000 }
  bravo: { type: openai, base_url: "${fakeB.url}", api_key: "${KEY_B}", timeout_ms: 5000 }
models:
  ttft:
    targets:
      - { backend: alpha, model: alpha-model, first_token_timeout_ms: 300 }
      - { backend: bravo, model: bravo-model }
`,
    extras: ({ gw }) => ({ client: sdk(gw) }),
  });

  test('a stream whose upstream sends headers then stalls fails over after first_token_timeout_ms', async () => {
    ctx.fakeA.enqueue({ kind: 'hangAfterHeaders' });
    const t0 = performance.now();
    const r = await askStream(ctx.client, 'ttft');
    const ms = performance.now() - t0;
    assert.equal(r.backend, 'bravo');
    assert.equal(r.attempts, '2');
    assert.equal(r.content, 'Hello from bravo-model');
    assert.ok(ms >= 250, `failed over after ${Math.round(ms)} ms, before the 300 ms first-token timeout`);
    assert.ok(ms < 1700, `failed over after ${Math.round(ms)} ms; first_token_timeout_ms is 300 (timeout_ms 2000)`);
  });

  test('a non-stream request to the same target waits timeout_ms, not the first-token timeout', async () => {
    ctx.fakeA.enqueue({ kind: 'hangAfterHeaders' });
    const t0 = performance.now();
    const r = await ask(ctx.client, 'ttft');
    const ms = performance.now() - t0;
    assert.equal(r.backend, 'bravo');
    assert.equal(r.attempts, '2');
    assert.ok(ms >= 1800, `failed over after ${Math.round(ms)} ms; timeout_ms is 2000`);
  });
});
