/**
 * The Pipeline (key's model list → cache → limits → coalescing → router → accounting) with the
 * services built as server/services.ts builds them (memory store, on a fake clock) and a real
 * Router over a fake BaseLLM that counts its calls and can be held open. What a key is charged is
 * read the way /status reads it (keysSection: a report-only admit on the store).
 *
 * Jobs carry their prompt as a fixed token count (no texts): the tokenizer runs in a worker that
 * takes seconds to build its encoders, and the estimate is not what these tests are about.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BaseLLM, CallContext, Capabilities } from '../backends/contract.ts';
import { BackendRegistry } from '../backends/registry.ts';
import { fromUpstreamStatus } from '../errors/upstream.ts';
import { parseConfig } from '../config/load.ts';
import { errorHeaders, GatewayError } from '../errors/gateway-error.ts';
import { keysSection, type KeyUsage } from '../http/admin/status-extras.ts';
import { ClientAbort, type AbortLike } from '../lib/abort.ts';
import { TokenCounter } from '../limits/tokens.ts';
import type { ChatCompletion, ChatCompletionChunk, ChatRequest } from '../protocol/chat/schema.ts';
import { ChunkPart } from '../protocol/stream-part.ts';
import { HealthState } from '../router/health-state.ts';
import { Router, type StreamHooks } from '../router/router.ts';
import type { Clock } from '../router/types.ts';
import { createServices, type BuiltServices } from '../server/services.ts';
import { FlightTable } from '../state/flights/flight-table.ts';
import { LeaderNotices } from '../state/flights/flight-notices.ts';
import { IpcStore, serveStateOp, type StateOp } from '../state/store/ipc.ts';
import { MemoryStore } from '../state/store/memory.ts';
import type { StateStore } from '../state/store/contract.ts';
import { SharedFlights } from '../state/flights/shared-flights.ts';
import { createLogger } from '../telemetry/logger.ts';
import { Pipeline, type Job } from './pipeline.ts';

const USAGE = { prompt_tokens: 4, completion_tokens: 6, total_tokens: 10 };

class FakeClock implements Clock {
  t = 1_700_000_000_000;
  now(): number {
    return this.t;
  }
  async sleep(ms: number, _signal: AbortLike): Promise<void> {
    this.t += ms;
  }
}

/** A promise the test resolves: holds an upstream call open so others can join it. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open = (): void => {};
  const wait = new Promise<void>((r) => {
    open = r;
  });
  return { wait, open };
}

type Item = { content: string } | { finish: true } | { usage: true } | { fail: true };

class FakeLLM implements BaseLLM {
  readonly type = 'fake' as const;
  readonly capabilities: Capabilities = { chat: true, embeddings: false, completions: false };
  calls = 0;
  hold: Promise<void> | undefined;
  /** the next call fails with this upstream status */
  failWith: number | undefined;
  items: Item[] = [{ content: 'Hel' }, { content: 'lo' }, { finish: true }, { usage: true }];

  constructor(readonly id: string) {}

  async chat(req: ChatRequest, _ctx: CallContext): Promise<ChatCompletion> {
    this.calls++;
    await this.hold;
    const status = this.failWith;
    if (status !== undefined) throw fromUpstreamStatus({ backend: this.id, status, secrets: [] });
    return {
      id: `chatcmpl-${this.calls}`,
      object: 'chat.completion',
      created: 1,
      model: req.model,
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello', refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage: USAGE,
    };
  }

  async chatStream(req: ChatRequest, _ctx: CallContext): Promise<AsyncIterable<ChunkPart<ChatCompletionChunk>>> {
    this.calls++;
    await this.hold;
    const status = this.failWith;
    if (status !== undefined) throw fromUpstreamStatus({ backend: this.id, status, secrets: [] });
    const items = this.items;
    const id = this.id;
    const base = { id: `chatcmpl-${this.calls}`, object: 'chat.completion.chunk' as const, created: 1, model: req.model };
    async function* gen(): AsyncGenerator<ChunkPart<ChatCompletionChunk>> {
      for (const it of items) {
        if ('fail' in it) throw fromUpstreamStatus({ backend: id, status: 502, secrets: [] });
        if ('usage' in it) yield ChunkPart.of<ChatCompletionChunk>({ ...base, choices: [], usage: USAGE });
        else {
          const finish = 'finish' in it ? ('stop' as const) : null;
          yield ChunkPart.of<ChatCompletionChunk>({ ...base, choices: [{ index: 0, delta: 'content' in it ? { content: it.content } : {}, logprobs: null, finish_reason: finish }] });
        }
      }
    }
    return gen();
  }
}

const hooks: StreamHooks<ChunkPart<ChatCompletionChunk>> = {
  commits: (p) => !!p.chunk.usage || p.chunk.choices.some((c) => !!c.delta.content || !!c.finish_reason),
  completes: (p) => p.chunk.choices.some((c) => !!c.finish_reason),
};

/**
 * One model `m` on backend `a` at $1 per input token and $2 per output token (so a call's spend is
 * easy to read), another model `n`, the cache on, and a key `k` with `limits`. With `table`, a
 * process of several whose flights are shared there (as workers share the primary's table).
 */
function setup(limits: string, extraKey = '', table?: FlightTable, shared?: StateStore) {
  const yaml = [
    'backends:',
    '  a: { type: fake }',
    'models:',
    '  m: { targets: [ { backend: a, model: a1, price: { input: 1000000, output: 2000000 } } ] }',
    '  n: { targets: [ { backend: a, model: a2 } ] }',
    'cache: { enabled: true }',
    'keys:',
    `  - { name: k, key: sk-test-key-k-0001, limits: ${limits} }`,
    ...(extraKey ? [`  - ${extraKey}`] : []),
  ].join('\n');
  const { config } = parseConfig(yaml, 'test.yaml', {});
  const clock = new FakeClock();
  const registry = new BackendRegistry(config, new Set());
  const a = new FakeLLM('a');
  (registry.get('a') ?? assert.fail('backend a')).llm = a;
  const router = new Router(config, registry, new HealthState(config.routing.breaker), clock, () => 0.5);
  const memory = new MemoryStore({ maxEntries: config.cache.max_entries, maxBytes: config.cache.max_bytes, now: () => clock.t });
  const store = shared ?? (table ? Object.assign(memory, { flights: new SharedFlights(table) }) : memory);
  const refused: string[] = [];
  const services: BuiltServices = createServices(config, createLogger('silent'), store, (key, limit) => refused.push(`${key} ${limit}`), new TokenCounter());
  const pipeline = new Pipeline(router, services);

  const job = (o: { model?: string; temperature?: number; signal?: AbortLike; key?: string; noCache?: boolean } = {}): Job & { body: ChatRequest } => ({
    op: 'chat',
    body: { model: o.model ?? 'm', messages: [{ role: 'user', content: 'hi' }], temperature: o.temperature ?? 0 },
    info: { signal: o.signal ?? new ClientAbort(), keyName: o.key ?? 'k', bodyBytes: 100, cacheControl: { noCache: o.noCache ?? false, noStore: false } },
    prompt: { texts: [], fixed: 10 },
    reserve: 100,
  });
  const once = (j: Job & { body: ChatRequest }) =>
    pipeline.once(j, (signal) =>
      router.run({ publicModel: j.body.model, op: 'chat', requestId: 'r', signal, stream: false, promptTokens: 25 }, (t, ctx) => a.chat({ ...j.body, model: t.model }, ctx)),
    );
  const stream = (j: Job & { body: ChatRequest }, wantsUsage = false) =>
    pipeline.stream(j, wantsUsage, (signal) =>
      router.runStream(
        { publicModel: j.body.model, op: 'chat', requestId: 'r', signal, stream: true, promptTokens: 25 },
        (t, ctx) => a.chatStream({ ...j.body, model: t.model, stream: true }, ctx),
        hooks,
      ),
    );
  /** What /status shows for key `k`. */
  const account = async (): Promise<KeyUsage> => {
    const keys = await keysSection(config, store, Date.now(), (key) => services.limiter.leasesHeld(key));
    return keys.k as KeyUsage;
  };
  return { a, pipeline, services, refused, job, once, stream, account, close: () => services.close() };
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

/** Lets queued promise callbacks run (no timer involved). */
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !cond(); i++) await turn();
  assert.ok(cond(), 'condition never became true');
}

async function texts(parts: AsyncIterable<ChunkPart<ChatCompletionChunk>>): Promise<string[]> {
  const out: string[] = [];
  for await (const p of parts) {
    const ch = p.chunk.choices[0];
    out.push(ch ? (ch.finish_reason ? `[${ch.finish_reason}]` : (ch.delta.content ?? '')) : `[usage ${p.chunk.usage?.total_tokens}]`);
  }
  return out;
}

describe('cache', () => {
  test('a miss calls the upstream; the same request again is a hit with the same answer and no second call', async () => {
    const s = setup('{ rpm: 10, tpm: 1000 }');
    const first = await s.once(s.job());
    assert.equal(first.served?.headers['x-switchyard-cache'], 'miss');
    assert.equal(first.attempts, 1);
    const second = await s.once(s.job());
    assert.equal(second.served?.headers['x-switchyard-cache'], 'hit');
    assert.equal(second.served?.headers.age, '0');
    assert.deepEqual(second.result, first.result);
    assert.equal(second.attempts, 0);
    assert.equal(s.a.calls, 1);
    // a hit counts against rpm but costs no tokens and no money
    assert.equal(second.served?.headers['x-ratelimit-remaining-requests'], '8');
    const acct = await s.account();
    assert.equal(acct.tokens?.remaining, 1000 - USAGE.total_tokens);
    await s.close();
  });

  test('Cache-Control: no-cache refreshes (calls upstream again); temperature > 0 bypasses the cache', async () => {
    const s = setup('{ rpm: 10 }');
    await s.once(s.job());
    const refreshed = await s.once(s.job({ noCache: true }));
    assert.equal(refreshed.served?.headers['x-switchyard-cache'], 'miss');
    assert.equal(s.a.calls, 2);
    const hot1 = await s.once(s.job({ temperature: 0.7 }));
    const hot2 = await s.once(s.job({ temperature: 0.7 }));
    assert.equal(hot1.served?.headers['x-switchyard-cache'], 'bypass');
    assert.equal(hot2.served?.headers['x-switchyard-cache'], 'bypass');
    assert.equal(s.a.calls, 4);
    await s.close();
  });

  test('another key does not see the first key\'s cached answer (per-key namespace)', async () => {
    const s = setup('{ rpm: 10 }', '{ name: k2, key: sk-test-key-k-0002 }');
    await s.once(s.job());
    const other = await s.once(s.job({ key: 'k2' }));
    assert.equal(other.served?.headers['x-switchyard-cache'], 'miss');
    assert.equal(s.a.calls, 2);
    await s.close();
  });
});

describe('coalescing', () => {
  test('two identical requests in flight share one upstream call; the follower is refunded (charged once)', async () => {
    const s = setup('{ rpm: 10, tpm: 1000, budget_usd: 100 }');
    const g = gate();
    s.a.hold = g.wait;
    const leader = s.once(s.job());
    await until(() => s.a.calls === 1);
    const follower = s.once(s.job());
    await turn();
    // both reservations (10 prompt + 100 output each) are held while the call is in flight
    assert.equal((await s.account()).tokens?.remaining, 1000 - 2 * 110);
    g.open();
    const [l, f] = await Promise.all([leader, follower]);
    assert.equal(s.a.calls, 1);
    assert.deepEqual(f.result, l.result);
    assert.equal(l.served?.headers['x-switchyard-cache'], 'miss');
    assert.equal(f.served?.headers['x-switchyard-cache'], 'hit');
    assert.equal(f.served?.headers['x-switchyard-coalesced'], 'true');
    assert.equal(f.attempts, 0);
    const acct = await s.account();
    assert.equal(acct.tokens?.remaining, 1000 - USAGE.total_tokens, 'the real usage, once');
    // 4 prompt tokens × $1 + 6 completion tokens × $2, once
    assert.equal(acct.budget?.spent_usd, 16);
    assert.equal(acct.requests?.remaining, 8, 'both count as requests');
    await s.close();
  });

  test('a shared call that fails fails both, and neither is charged', async () => {
    const s = setup('{ tpm: 1000 }');
    const g = gate();
    s.a.hold = g.wait;
    s.a.failWith = 400;
    const leader = failure(s.once(s.job()));
    await until(() => s.a.calls === 1);
    const follower = failure(s.once(s.job()));
    await turn();
    g.open();
    const [l, f] = await Promise.all([leader, follower]);
    assert.equal(l.status, 400);
    assert.equal(f.status, 400);
    assert.equal(s.a.calls, 1);
    assert.equal((await s.account()).tokens?.remaining, 1000);
    await s.close();
  });
});

describe('limits', () => {
  test('rpm: the request over the limit is refused with 429, rate-limit headers and retry-after, before any upstream call', async () => {
    const s = setup('{ rpm: 2 }');
    await s.once(s.job({ temperature: 1 }));
    const ok = await s.once(s.job({ temperature: 1 }));
    assert.equal(ok.served?.headers['x-ratelimit-limit-requests'], '2');
    assert.equal(ok.served?.headers['x-ratelimit-remaining-requests'], '0');
    const e = await failure(s.once(s.job({ temperature: 1 })));
    assert.equal(e.status, 429);
    assert.equal(e.code, 'rate_limit_exceeded');
    assert.equal(e.type, 'rate_limit_error');
    const h = errorHeaders(e);
    assert.equal(h['x-ratelimit-limit-requests'], '2');
    assert.equal(h['x-ratelimit-remaining-requests'], '0');
    assert.ok(Number(h['retry-after']) >= 1);
    assert.ok(Number(h['retry-after-ms']) > 0);
    assert.equal(s.a.calls, 2);
    assert.deepEqual(s.refused, ['k requests']);
    await s.close();
  });

  test('tpm: the estimate is reserved while the call runs, then reconciled with the real usage', async () => {
    const s = setup('{ tpm: 1000 }');
    const g = gate();
    s.a.hold = g.wait;
    const p = s.once(s.job());
    await until(() => s.a.calls === 1);
    assert.equal((await s.account()).tokens?.remaining, 890, '10 prompt + 100 output reserved');
    g.open();
    const r = await p;
    assert.equal(r.served?.headers['x-ratelimit-limit-tokens'], '1000');
    assert.equal((await s.account()).tokens?.remaining, 1000 - USAGE.total_tokens);
    await s.close();
  });

  test('tpm: a request larger than the whole allowance is refused outright, not told to retry', async () => {
    const s = setup('{ tpm: 50 }');
    const e = await failure(s.once(s.job()));
    assert.equal(e.status, 429);
    assert.match(e.message, /Request too large/);
    assert.equal(errorHeaders(e)['x-should-retry'], 'false');
    assert.equal(s.a.calls, 0);
    await s.close();
  });

  test('an upstream failure refunds the reservation and the error carries the key\'s rate-limit headers', async () => {
    const s = setup('{ tpm: 1000, budget_usd: 100 }');
    s.a.failWith = 400;
    const e = await failure(s.once(s.job({ temperature: 1 })));
    assert.equal(e.status, 400);
    assert.equal(errorHeaders(e)['x-ratelimit-limit-tokens'], '1000');
    const acct = await s.account();
    assert.equal(acct.tokens?.remaining, 1000);
    assert.equal(acct.budget?.spent_usd, 0, 'nothing spent');
    await s.close();
  });

  test('budget: spend is usage × the serving target\'s price; once spent, 429 budget_exceeded', async () => {
    const s = setup('{ budget_usd: 20 }');
    await s.once(s.job({ temperature: 1 }));
    assert.equal((await s.account()).budget?.spent_usd, 16);
    await s.once(s.job({ temperature: 1 }));
    const e = await failure(s.once(s.job({ temperature: 1 })));
    assert.equal(e.status, 429);
    assert.equal(e.code, 'budget_exceeded');
    assert.equal(e.type, 'insufficient_quota');
    assert.equal(s.a.calls, 2);
    await s.close();
  });
});

describe("a key's model list", () => {
  test('a model outside the list answers 404 as if it did not exist, and is not listed', async () => {
    const s = setup('{ rpm: 10 }', '{ name: narrow, key: sk-test-key-narrow1, models: [ m ] }');
    const e = await failure(s.once(s.job({ key: 'narrow', model: 'n' })));
    assert.equal(e.status, 404);
    assert.equal(e.code, 'model_not_found');
    assert.equal(s.a.calls, 0);
    assert.equal((await s.once(s.job({ key: 'narrow' }))).result.choices[0]?.message.content, 'Hello');
    assert.deepEqual(s.pipeline.models('narrow'), ['m']);
    assert.deepEqual(s.pipeline.models('k').sort(), ['m', 'n']);
    await s.close();
  });
});

describe('concurrency lease', () => {
  test('released after a success and after an error: the next request is admitted', async () => {
    const s = setup('{ max_concurrent: 1 }');
    await s.once(s.job({ temperature: 1 }));
    s.a.failWith = 503;
    await failure(s.once(s.job({ temperature: 1 })));
    s.a.failWith = undefined;
    await s.once(s.job({ temperature: 1 }));
    assert.equal((await s.account()).concurrency?.in_use, 0);
    await s.close();
  });

  test('held while a call runs: a second request is refused 429 (max_concurrent)', async () => {
    const s = setup('{ max_concurrent: 1 }');
    const g = gate();
    s.a.hold = g.wait;
    const p = s.once(s.job({ temperature: 1 }));
    await until(() => s.a.calls === 1);
    const e = await failure(s.once(s.job({ temperature: 1 })));
    assert.equal(e.status, 429);
    assert.match(e.message, /concurrent requests/);
    g.open();
    await p;
    await s.close();
  });
});

describe('streams', () => {
  test('usage is recorded from the usage chunk (the client does not see it unless asked) and reconciles tpm', async () => {
    const s = setup('{ tpm: 1000 }');
    const r = await s.stream(s.job({ temperature: 1 }));
    assert.deepEqual(await texts(r.result), ['Hel', 'lo', '[stop]']);
    assert.deepEqual(r.usage.value, USAGE);
    assert.equal((await s.account()).tokens?.remaining, 1000 - USAGE.total_tokens);

    const asked = await s.stream(s.job({ temperature: 1 }), true);
    assert.deepEqual(await texts(asked.result), ['Hel', 'lo', '[stop]', '[usage 10]']);
    await s.close();
  });

  test('a cached stream is replayed: same chunks, x-switchyard-cache: hit, no second upstream call, no tokens', async () => {
    const s = setup('{ tpm: 1000 }');
    const first = await s.stream(s.job());
    assert.equal(first.served?.headers['x-switchyard-cache'], 'miss');
    const got = await texts(first.result);
    const again = await s.stream(s.job());
    assert.equal(again.served?.headers['x-switchyard-cache'], 'hit');
    assert.deepEqual(await texts(again.result), got);
    assert.equal(s.a.calls, 1);
    assert.equal((await s.account()).tokens?.remaining, 1000 - USAGE.total_tokens);
    await s.close();
  });

  test('two identical streams in flight share one upstream stream; the follower is refunded', async () => {
    const s = setup('{ tpm: 1000, budget_usd: 100 }');
    const g = gate();
    s.a.hold = g.wait;
    const leader = s.stream(s.job());
    await until(() => s.a.calls === 1);
    const follower = s.stream(s.job());
    await turn();
    g.open();
    const [l, f] = await Promise.all([leader, follower]);
    assert.equal(f.served?.headers['x-switchyard-coalesced'], 'true');
    const [lt, ft] = await Promise.all([texts(l.result), texts(f.result)]);
    assert.deepEqual(lt, ['Hel', 'lo', '[stop]']);
    assert.deepEqual(ft, lt);
    assert.equal(s.a.calls, 1);
    const acct = await s.account();
    assert.equal(acct.tokens?.remaining, 1000 - USAGE.total_tokens);
    assert.equal(acct.budget?.spent_usd, 16);
    await s.close();
  });

  test('a stream holds its lease until it ends; released on a clean end, on a mid-stream error and on client abort', async () => {
    const s = setup('{ max_concurrent: 1 }');
    // clean end
    const r1 = await s.stream(s.job({ temperature: 1 }));
    const refused = await failure(s.stream(s.job({ temperature: 1 })));
    assert.equal(refused.status, 429, 'held while the stream is open');
    await texts(r1.result);
    assert.equal((await s.account()).concurrency?.in_use, 0);

    // an error after the commit point
    s.a.items = [{ content: 'Hel' }, { fail: true }];
    const r2 = await s.stream(s.job({ temperature: 1 }));
    await assert.rejects(texts(r2.result), (e: unknown) => e instanceof GatewayError && e.status === 502);
    assert.equal((await s.account()).concurrency?.in_use, 0);

    // the client goes away without reading to the end
    s.a.items = [{ content: 'Hel' }, { content: 'lo' }, { finish: true }];
    const signal = new ClientAbort();
    await s.stream(s.job({ temperature: 1, signal }));
    assert.equal((await s.account()).concurrency?.in_use, 1);
    signal.abort(new Error('client left'));
    assert.equal((await s.account()).concurrency?.in_use, 0);
    await s.stream(s.job({ temperature: 1 }));
    await s.close();
  });

  test('a cached-path stream releases its lease on client abort too', async () => {
    const s = setup('{ max_concurrent: 1 }');
    const signal = new ClientAbort();
    await s.stream(s.job({ signal }));
    assert.equal((await s.account()).concurrency?.in_use, 1);
    signal.abort(new Error('client left'));
    assert.equal((await s.account()).concurrency?.in_use, 0);
    await s.close();
  });
});

describe('coalescing across processes', () => {
  /** A leader in one process holding its upstream call, and a second process on the same flights. */
  function pair() {
    const table = new FlightTable();
    const one = setup('{ rpm: 10 }', '', table);
    const two = setup('{ rpm: 10 }', '', table);
    const g = gate();
    one.a.hold = g.wait;
    return { one, two, open: g.open, close: async () => Promise.all([one.close(), two.close()]) };
  }

  test('a JSON follower whose client left makes no upstream call of its own', async () => {
    const p = pair();
    const leader = p.one.once(p.one.job());
    await until(() => p.one.a.calls === 1);
    const signal = new ClientAbort();
    const follower = failure(p.two.once(p.two.job({ signal })));
    signal.abort(new Error('client left'));
    // the follower claims while the leader's call is still held
    await turn();
    p.open();
    assert.equal((await leader).served?.headers['x-switchyard-cache'], 'miss');
    assert.equal((await follower).code, 'client_closed_request');
    assert.equal(p.two.a.calls, 0, 'no upstream call for a client that is gone');
    await p.close();
  });

  test('a stream follower whose client left makes no upstream call of its own', async () => {
    const p = pair();
    const leader = p.one.stream(p.one.job());
    await until(() => p.one.a.calls === 1);
    const signal = new ClientAbort();
    const follower = failure(p.two.stream(p.two.job({ signal })));
    signal.abort(new Error('client left'));
    p.open();
    assert.deepEqual(await texts((await leader).result), ['Hel', 'lo', '[stop]']);
    assert.equal((await follower).code, 'client_closed_request');
    assert.equal(p.two.a.calls, 0, 'no upstream call for a client that is gone');
    await p.close();
  });

  /**
   * Two workers on one primary's store and flight table (the cluster's IPC, in process), the
   * first's upstream held; the second's attach reaches the primary only once `attach` opens.
   */
  function ipcPair() {
    const primary = new MemoryStore({ maxEntries: 100, maxBytes: 1 << 20 });
    const table = new FlightTable();
    const attach = gate();
    const worker = (holdAttach: boolean): StateStore => {
      const notices = new LeaderNotices();
      return new IpcStore(async (o: StateOp) => {
        if (holdAttach && o.op === 'flight' && o.f.m === 'attach') await attach.wait;
        return serveStateOp(primary, o, table, (id) => notices.heard(id));
      }, notices);
    };
    const one = setup('{ rpm: 10 }', '', undefined, worker(false));
    const two = setup('{ rpm: 10 }', '', undefined, worker(true));
    const upstream = gate();
    one.a.hold = upstream.wait;
    /** Once the second worker has looked the key up (the leader's claim) and is attaching, lets the first answer. */
    const answer = async (): Promise<void> => {
      for (let i = 0; i < 200 && table.size === 0; i++) await turn();
      upstream.open();
    };
    /** Once the first worker's release stored the answer, lets the second attach. */
    const attachLate = async (): Promise<void> => {
      for (let i = 0; i < 200 && primary.cacheEntries() === 0; i++) await turn();
      assert.equal(primary.cacheEntries(), 1, 'the release stored the answer');
      attach.open();
    };
    return { one, two, answer, attachLate, close: async () => Promise.all([one.close(), two.close()]) };
  }

  test('a JSON follower that attaches just after its flight ended unfollowed is served from the cache the release stored', async () => {
    const p = ipcPair();
    const leader = p.one.once(p.one.job());
    await until(() => p.one.a.calls === 1);
    const follower = p.two.once(p.two.job());
    await p.answer();
    assert.equal((await leader).served?.headers['x-switchyard-cache'], 'miss');
    await p.attachLate();
    const f = await follower;
    assert.equal(f.result.choices[0]?.message.content, 'Hello');
    assert.equal(p.two.a.calls, 0, 'no upstream call of its own');
    assert.equal(f.served?.headers['x-switchyard-coalesced'], 'true');
    await p.close();
  });

  test('a stream follower that attaches just after its flight ended unfollowed is served from the cache the release stored', async () => {
    const p = ipcPair();
    const leader = p.one.stream(p.one.job());
    await until(() => p.one.a.calls === 1);
    const follower = p.two.stream(p.two.job());
    await p.answer();
    assert.deepEqual(await texts((await leader).result), ['Hel', 'lo', '[stop]']);
    await p.attachLate();
    const f = await follower;
    assert.deepEqual(await texts(f.result), ['Hel', 'lo', '[stop]']);
    assert.equal(p.two.a.calls, 0, 'no upstream call of its own');
    assert.equal(f.served?.headers['x-switchyard-coalesced'], 'true');
    await p.close();
  });
});
