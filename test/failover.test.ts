/**
 * End-to-end failover of non-streaming requests through a real gateway and fake OpenAI-compatible
 * upstreams: which upstream failures fail over, which return at once, how a request that nothing
 * could serve is reported (status, headers, envelope, no secrets), unconfigured backends, client
 * aborts and the request log.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import type { Behaviour } from './support/fake-openai-upstream.ts';
import { upstreamsWithGateway } from './support/suite.ts';

const KEY_A = 'sk-test-a-secret';
const KEY_B = 'sk-test-b-secret';
const PROMPT_CANARY = 'prompt-canary-7f3a9e';

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

async function until(cond: () => boolean, what: string, timeoutMs = 2000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

/** Asserts the OpenAI error envelope and returns its `error` object. */
function envelope(r: Reply): { message: string; type: string; param: unknown; code: unknown } {
  assert.match(r.headers.get('content-type') ?? '', /^application\/json\b/);
  assert.ok(isRecord(r.json), `a JSON object body, got ${r.text}`);
  assert.deepEqual(Object.keys(r.json), ['error']);
  const e = r.json['error'];
  assert.ok(isRecord(e));
  assert.deepEqual(Object.keys(e).sort(), ['code', 'message', 'param', 'type']);
  assert.equal(typeof e['message'], 'string');
  assert.equal(typeof e['type'], 'string');
  assert.ok(e['code'] === null || typeof e['code'] === 'string');
  assert.ok(!r.text.includes(KEY_A) && !r.text.includes(KEY_B), `no upstream key in the body: ${r.text}`);
  assert.ok(!/\bsk-[A-Za-z0-9_-]{6,}/.test(r.text), `nothing key-shaped in the body: ${r.text}`);
  return { message: e['message'] as string, type: e['type'] as string, param: e['param'], code: e['code'] };
}

describe('failover of non-streaming requests', () => {
  const ctx = upstreamsWithGateway({
    upstreams: { fakeA: { apiKey: KEY_A }, fakeB: { apiKey: KEY_B } },
    yaml: ({ fakeA, fakeB }) => `
# One attempt per target and no circuit breaker: retries and the breaker have their own tests (routing.test.ts).
routing: { retry: { max_retries: 0 }, breaker: { consecutive_failures: 0, min_requests: 1000000 } }
backends:
  a: { type: openai, base_url: "${fakeA.url}", api_key: "${KEY_A}", timeout_ms: 400 }
  patient: { type: openai, base_url: "${fakeA.url}", api_key: "${KEY_A}", timeout_ms: 5000 }
  b: { type: openai, base_url: "${fakeB.url}", api_key: "${KEY_B}", timeout_ms: 2000 }
  dead: { type: openai, base_url: "http://127.0.0.1:1/v1", api_key: "${KEY_A}", timeout_ms: 1000 }
  nokey1: { type: openai, base_url: "${fakeA.url}", api_key: "\${MISSING_KEY:-}" }
  nokey2: { type: openai, base_url: "${fakeB.url}", api_key: "\${MISSING_KEY:-}" }
models:
  m: { targets: [ { backend: a, model: a-model }, { backend: b, model: b-model } ] }
  solo: { targets: [ { backend: a, model: a-model } ] }
  dead-first: { targets: [ { backend: dead, model: x }, { backend: b, model: b-model } ] }
  dead-only: { targets: [ { backend: dead, model: x } ] }
  skip-unconfigured: { targets: [ { backend: nokey1, model: a-model }, { backend: b, model: b-model } ] }
  unconfigured: { targets: [ { backend: nokey1, model: a-model }, { backend: nokey2, model: b-model } ] }
  abortable: { targets: [ { backend: patient, model: a-model }, { backend: b, model: b-model } ] }
`,
  });

  const chat = async (model: string, init: { requestId?: string; signal?: AbortSignal } = {}): Promise<Reply> => {
    const res = await fetch(`${ctx.gw.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(init.requestId ? { 'x-request-id': init.requestId } : {}) },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: `please answer ${PROMPT_CANARY}` }] }),
      ...(init.signal ? { signal: init.signal } : {}),
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json };
  };

  const assertServedByB = (r: Reply): void => {
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers.get('x-switchyard-backend'), 'b');
    assert.equal(r.headers.get('x-switchyard-model'), 'b-model');
    assert.equal(r.headers.get('x-switchyard-attempts'), '2');
    assert.ok(isRecord(r.json) && Array.isArray(r.json['choices']));
    const ch: unknown = r.json['choices'][0];
    assert.ok(isRecord(ch) && isRecord(ch['message']));
    assert.equal(ch['message']['content'], 'Hello from b-model');
    assert.equal(ctx.fakeB.requests.length, 1);
  };

  describe('retryable upstream failures fail over to the next target, in order', () => {
    const cases: Array<{ name: string; behaviour: Behaviour }> = [
      ...[500, 502, 503, 429, 408].map((status) => ({
        name: `upstream ${status}`,
        behaviour: { kind: 'error', status, message: `failure ${status} for ${KEY_A}` } as Behaviour,
      })),
      { name: 'socket destroyed', behaviour: { kind: 'destroy' } },
      { name: 'hang past timeout_ms', behaviour: { kind: 'hang' } },
      { name: 'headers then nothing past timeout_ms', behaviour: { kind: 'hangAfterHeaders' } },
      { name: 'upstream 401 (the gateway’s key was rejected)', behaviour: { kind: 'error', status: 401, message: `Incorrect API key provided: ${KEY_A}` } },
      { name: 'upstream 403', behaviour: { kind: 'error', status: 403, message: 'forbidden' } },
      { name: '200 with a body that is not JSON', behaviour: { kind: 'error', status: 200, rawBody: '{"choices": [', headers: { 'content-type': 'application/json' } } },
      { name: '200 with JSON without choices', behaviour: { kind: 'error', status: 200, rawBody: '{"id":"x","object":"chat.completion"}' } },
      { name: '200 with a plain-text body', behaviour: { kind: 'error', status: 200, rawBody: 'all good' } },
    ];
    for (const c of cases) {
      test(c.name, async () => {
        ctx.fakeA.enqueue(c.behaviour);
        const r = await chat('m');
        assertServedByB(r);
        assert.equal(ctx.fakeA.requests.length, 1, 'a was tried first, once');
        const body = ctx.fakeB.requests[0]?.body;
        assert.ok(isRecord(body));
        assert.equal(body['model'], 'b-model', 'b gets its own model name');
      });
    }

    test('connection refused', async () => {
      const r = await chat('dead-first');
      assertServedByB(r);
    });

    test('the same through the openai SDK', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 503, message: 'overloaded' });
      const client = new OpenAI({ baseURL: ctx.gw.baseURL, apiKey: 'unused', maxRetries: 0 });
      const { data, response } = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
      assert.equal(data.choices[0]?.message.content, 'Hello from b-model');
      assert.equal(response.headers.get('x-switchyard-backend'), 'b');
      assert.equal(response.headers.get('x-switchyard-attempts'), '2');
    });
  });

  describe('client-fault upstream errors return at once, without failover', () => {
    for (const status of [400, 404, 422]) {
      test(`upstream ${status}`, async () => {
        const message = `upstream says ${status}: bad parameter "temperature"`;
        ctx.fakeA.enqueue({ kind: 'error', status, message, param: 'temperature', code: 'invalid_value' });
        const r = await chat('m');
        assert.equal(r.status, status);
        const e = envelope(r);
        assert.equal(e.message, message);
        assert.equal(e.param, 'temperature');
        assert.equal(e.code, 'invalid_value');
        assert.equal(r.headers.get('x-switchyard-attempts'), '1');
        assert.notEqual(r.headers.get('x-should-retry'), 'false', 'not an exhausted-retries answer');
        assert.equal(ctx.fakeA.requests.length, 1);
        assert.equal(ctx.fakeB.requests.length, 0, 'b is never called');
      });
    }

    test('the openai SDK raises the matching error class with the upstream message', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 400, message: 'messages must not be empty', param: 'messages' });
      const client = new OpenAI({ baseURL: ctx.gw.baseURL, apiKey: 'unused', maxRetries: 0 });
      await assert.rejects(client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }), (err: unknown) => {
        assert.ok(err instanceof OpenAI.BadRequestError);
        assert.equal(err.status, 400);
        assert.match(err.message, /messages must not be empty/);
        assert.equal(err.param, 'messages');
        return true;
      });
      assert.equal(ctx.fakeB.requests.length, 0);
    });
  });

  describe('when every target fails', () => {
    const exhausted = (r: Reply, attempts: number): void => {
      assert.equal(r.headers.get('x-should-retry'), 'false');
      assert.equal(r.headers.get('x-switchyard-attempts'), String(attempts));
    };

    test('429 stays 429 with retry-after from upstream retry-after', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 429, message: `Rate limit reached for ${KEY_A}`, headers: { 'retry-after': '7' } });
      const r = await chat('solo');
      assert.equal(r.status, 429);
      exhausted(r, 1);
      assert.equal(r.headers.get('retry-after'), '7');
      const e = envelope(r);
      assert.equal(e.type, 'rate_limit_error');
      assert.equal(e.code, 'rate_limit_exceeded');
    });

    test('429 with retry-after-ms → retry-after in whole seconds, rounded up', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 429, message: 'slow down', headers: { 'retry-after-ms': '2500' } });
      const r = await chat('solo');
      assert.equal(r.status, 429);
      exhausted(r, 1);
      assert.equal(r.headers.get('retry-after'), '3');
      envelope(r);
    });

    for (const status of [500, 502]) {
      test(`upstream ${status} → 502`, async () => {
        ctx.fakeA.enqueue({ kind: 'error', status, message: `internal failure, key=${KEY_A}` });
        const r = await chat('solo');
        assert.equal(r.status, 502);
        exhausted(r, 1);
        const e = envelope(r);
        assert.equal(e.type, 'upstream_error');
        assert.equal(e.code, 'upstream_error');
      });
    }

    test('upstream 502 with a garbage non-JSON body → 502 envelope, nothing of the body leaks', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 502, rawBody: `<html><body>Bad Gateway ${KEY_A} Bearer ${KEY_A}</body></html>` });
      const r = await chat('solo');
      assert.equal(r.status, 502);
      exhausted(r, 1);
      const e = envelope(r);
      assert.ok(!r.text.includes('<html>'), 'no HTML passed through');
      assert.equal(e.code, 'upstream_error');
    });

    test('upstream 400 with a garbage non-JSON body → 400 envelope', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 400, rawBody: `oops ${KEY_A}` });
      const r = await chat('solo');
      assert.equal(r.status, 400);
      const e = envelope(r);
      assert.equal(e.type, 'invalid_request_error');
    });

    test('upstream 503 → 503 with retry-after (upstream’s value kept)', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 503, message: `overloaded ${KEY_A}`, headers: { 'retry-after': '5' } });
      const r = await chat('solo');
      assert.equal(r.status, 503);
      exhausted(r, 1);
      assert.equal(r.headers.get('retry-after'), '5');
      const e = envelope(r);
      assert.equal(e.type, 'service_unavailable_error');
    });

    test('upstream 503 without retry-after → 503 still carries a retry-after', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 503, message: 'overloaded' });
      const r = await chat('solo');
      assert.equal(r.status, 503);
      assert.match(r.headers.get('retry-after') ?? '', /^\d+$/);
      envelope(r);
    });

    test('both targets answer 503 → 503, attempts 2', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 503, message: `a down ${KEY_A}` });
      ctx.fakeB.enqueue({ kind: 'error', status: 503, message: `b down ${KEY_B}` });
      const r = await chat('m');
      assert.equal(r.status, 503);
      exhausted(r, 2);
      assert.match(r.headers.get('retry-after') ?? '', /^\d+$/);
      envelope(r);
      assert.equal(ctx.fakeA.requests.length, 1);
      assert.equal(ctx.fakeB.requests.length, 1);
    });

    test('timeout → 504 upstream_timeout', async () => {
      ctx.fakeA.enqueue({ kind: 'hang' });
      const r = await chat('solo');
      assert.equal(r.status, 504);
      exhausted(r, 1);
      const e = envelope(r);
      assert.equal(e.code, 'upstream_timeout');
      assert.equal(e.type, 'timeout_error');
      await withTimeout(ctx.fakeA.waitForClientAbort(), 2000, 'the timed-out upstream request to be aborted');
    });

    test('connection refused → 502 upstream_unreachable', async () => {
      const r = await chat('dead-only');
      assert.equal(r.status, 502);
      exhausted(r, 1);
      const e = envelope(r);
      assert.equal(e.code, 'upstream_unreachable');
    });

    test('upstream 401 → 502 upstream_auth_failed (not 401)', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 401, message: `Incorrect API key provided: ${KEY_A}` });
      const r = await chat('solo');
      assert.equal(r.status, 502);
      exhausted(r, 1);
      const e = envelope(r);
      assert.equal(e.code, 'upstream_auth_failed');
      assert.equal(e.type, 'upstream_error');
    });

    test('200 with invalid JSON → 502 upstream_malformed_response', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 200, rawBody: '{"choices": [', headers: { 'content-type': 'application/json' } });
      const r = await chat('solo');
      assert.equal(r.status, 502);
      exhausted(r, 1);
      assert.equal(envelope(r).code, 'upstream_malformed_response');
    });

    test('200 with JSON without choices → 502 upstream_malformed_response', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 200, rawBody: '{"id":"x"}' });
      const r = await chat('solo');
      assert.equal(r.status, 502);
      exhausted(r, 1);
      assert.equal(envelope(r).code, 'upstream_malformed_response');
    });
  });

  describe('backends without an api_key', () => {
    test('a backend whose api_key is an unset "${MISSING_KEY:-}" is skipped', async () => {
      const r = await chat('skip-unconfigured');
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers.get('x-switchyard-backend'), 'b');
      assert.equal(ctx.fakeA.requests.length, 0, 'the unconfigured backend is never called');
      assert.equal(ctx.fakeB.requests.length, 1);
    });

    test('a model with only such backends answers 503 backend_not_configured', async () => {
      const r = await chat('unconfigured');
      assert.equal(r.status, 503);
      const e = envelope(r);
      assert.equal(e.code, 'backend_not_configured');
      assert.match(r.headers.get('retry-after') ?? '', /^\d+$/);
      assert.equal(ctx.fakeA.requests.length, 0);
      assert.equal(ctx.fakeB.requests.length, 0);
    });
  });

  test('a client that aborts a non-streaming request aborts the upstream request', async () => {
    ctx.fakeA.enqueue({ kind: 'hang' });
    const ac = new AbortController();
    const pending = chat('abortable', { signal: ac.signal });
    await until(() => ctx.fakeA.requests.length === 1, 'the upstream to receive the request');
    ac.abort();
    await assert.rejects(pending, (err: unknown) => err instanceof Error && err.name === 'AbortError');
    await withTimeout(ctx.fakeA.waitForClientAbort(), 2000, 'the upstream request to be aborted');
    assert.equal(ctx.fakeA.clientAborts, 1);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(ctx.fakeB.requests.length, 0, 'no failover for a request nobody is waiting for');
    // and the gateway is fine afterwards
    const r = await chat('abortable');
    assert.equal(r.status, 200);
  });

  test('logs one JSON line per request with request_id, status, backend, attempts — and no prompt, completion or key', async () => {
    const completion = 'completion-canary-51c0';
    const ids = { ok: 'req-log-ok-1', failover: 'req-log-failover-2', fail: 'req-log-fail-3', client: 'req-log-client-4' };
    ctx.fakeA.enqueue({ kind: 'reply', content: completion });
    assert.equal((await chat('m', { requestId: ids.ok })).status, 200);
    ctx.fakeA.enqueue({ kind: 'error', status: 500, message: `boom ${KEY_A} ${PROMPT_CANARY}` });
    ctx.fakeB.enqueue({ kind: 'reply', content: completion });
    assert.equal((await chat('m', { requestId: ids.failover })).status, 200);
    ctx.fakeA.enqueue({ kind: 'error', status: 401, message: `Incorrect API key provided: ${KEY_A}` });
    assert.equal((await chat('solo', { requestId: ids.fail })).status, 502);
    ctx.fakeA.enqueue({ kind: 'error', status: 400, message: `bad request about ${PROMPT_CANARY}` });
    assert.equal((await chat('m', { requestId: ids.client })).status, 400);

    const requestLines = (): Array<Record<string, unknown>> =>
      ctx.gw.logs
        .map((l) => JSON.parse(l) as unknown)
        .filter((j): j is Record<string, unknown> => isRecord(j) && j['msg'] === 'request');
    await until(() => Object.values(ids).every((id) => requestLines().some((l) => l['request_id'] === id)), 'the request log lines');

    for (const line of ctx.gw.logs) {
      assert.ok(line.endsWith('\n') && !line.slice(0, -1).includes('\n'), 'one line per entry');
      const j: unknown = JSON.parse(line);
      assert.ok(isRecord(j), 'each line is a JSON object');
      assert.ok(!line.includes(PROMPT_CANARY), `no prompt text in the log: ${line}`);
      assert.ok(!line.includes(completion), `no completion text in the log: ${line}`);
      assert.ok(!line.includes(KEY_A) && !line.includes(KEY_B), `no key in the log: ${line}`);
    }

    const lineFor = (id: string): Record<string, unknown> => {
      const ls = requestLines().filter((l) => l['request_id'] === id);
      assert.equal(ls.length, 1, `exactly one request line for ${id}`);
      const l = ls[0];
      assert.ok(l);
      return l;
    };
    const ok = lineFor(ids.ok);
    assert.equal(ok['status'], 200);
    assert.equal(ok['backend'], 'a');
    assert.equal(ok['attempts'], 1);
    const fo = lineFor(ids.failover);
    assert.equal(fo['status'], 200);
    assert.equal(fo['backend'], 'b');
    assert.equal(fo['attempts'], 2);
    const fail = lineFor(ids.fail);
    assert.equal(fail['status'], 502);
    assert.equal(fail['backend'], 'a');
    assert.equal(fail['attempts'], 1);
    assert.equal(fail['error'], 'upstream_auth_failed');
    const cf = lineFor(ids.client);
    assert.equal(cf['status'], 400);
    assert.equal(cf['backend'], 'a');
    assert.equal(cf['attempts'], 1);
  });
});
