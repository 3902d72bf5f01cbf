/**
 * The committed stream, read through poll() (chunks that are ready now) and through next(): the
 * same chunks, the same errors, and the target's outcome recorded exactly once either way.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { GatewayError } from '../errors/gateway-error.ts';
import { ended, shapeUsage } from '../gateway/pipeline-streams.ts';
import type { Chunk, Usage } from '../gateway/pipeline.ts';
import { DONE, pollable, type Pollable } from '../lib/pollable.ts';
import { ChunkPart } from '../protocol/stream-part.ts';
import { Attempt } from './attempt.ts';
import type { TargetHealth } from './health-state.ts';
import type { ResolvedTarget } from './router.ts';
import { openCommitted } from './stream.ts';

interface C extends Chunk {
  n: number;
  content?: string;
  finish?: boolean;
}
type P = ChunkPart<C>;

/** A source that hands its chunks out synchronously (as one upstream read does), then ends or fails. */
function source(items: P[], end: 'done' | Error): AsyncIterable<P> & { returned: boolean } {
  let i = 0;
  const self = {
    returned: false,
    [Symbol.asyncIterator]: (): Pollable<P> => ({
      poll: () => {
        if (i < items.length) return { done: false, value: items[i++] as P };
        if (end === 'done') return DONE;
        throw end;
      },
      next: async () => {
        if (i < items.length) return { done: false, value: items[i++] as P };
        if (end === 'done') return DONE;
        throw end;
      },
      return: async () => {
        self.returned = true;
        return DONE;
      },
    }),
  };
  return self;
}

function chunk(n: number, extra: Partial<C> = {}): P {
  return ChunkPart.of({ n, choices: [{}], ...extra });
}

function fakeHealth(): { health: TargetHealth; outcomes: string[] } {
  const outcomes: string[] = [];
  const health = {
    breaker: { record: (o: string) => outcomes.push(o) },
    stats: { observeSuccess: () => outcomes.push('stats:success'), observeFailure: () => outcomes.push('stats:failure') },
  } as unknown as TargetHealth;
  return { health, outcomes };
}

async function open(src: AsyncIterable<P>) {
  const { health, outcomes } = fakeHealth();
  const client = new AbortController();
  const attempt = new Attempt(client.signal);
  const stream = await openCommitted<P>({
    attempt,
    clientSignal: client.signal,
    target: { backend: 'b' } as ResolvedTarget,
    health,
    clock: { now: () => 0, sleep: async () => {} },
    firstTokenTimeoutMs: 10_000,
    idleTimeoutMs: 10_000,
    open: async () => src,
    hooks: { commits: (p) => p.chunk.content !== undefined, completes: (p) => p.chunk.finish === true },
    classify: (err) => (err instanceof GatewayError ? err : new GatewayError('upstream_error', 'classified', { wireCode: 'x' })),
  });
  return { stream, outcomes, attempt };
}

/** Reads everything by poll() where it answers, next() where it does not. */
async function drain(it: AsyncIterator<P>, usePoll: boolean): Promise<{ got: number[]; error?: unknown }> {
  const got: number[] = [];
  const p = usePoll ? pollable(it) : undefined;
  try {
    for (;;) {
      const r = p?.poll() ?? (await it.next());
      if (r.done) return { got };
      got.push(r.value.chunk.n);
    }
  } catch (error) {
    return { got, error };
  }
}

const complete = (): P[] => [chunk(0), chunk(1, { content: 'a' }), chunk(2, { content: 'b' }), chunk(3, { finish: true })];

describe('committed stream: poll() and next() agree', () => {
  for (const usePoll of [true, false]) {
    const how = usePoll ? 'poll()' : 'next()';

    test(`${how}: every chunk in order, success recorded once, the commit chunk marked for the writer`, async () => {
      const items = complete();
      const { stream, outcomes } = await open(source(items, 'done'));
      const it = stream[Symbol.asyncIterator]();
      if (usePoll) assert.ok(pollable(it), 'the committed stream is pollable');
      const r = await drain(it, usePoll);
      assert.deepEqual(r.got, [0, 1, 2, 3]);
      assert.equal(r.error, undefined);
      assert.deepEqual(outcomes, ['success', 'stats:success']);
      assert.equal(items[1]?.flush, true);
      assert.equal(items[0]?.flush, false);
      assert.deepEqual(await it.next(), DONE, 'ended for good');
    });

    test(`${how}: a stream that ends without a finish is reported truncated, failure recorded once`, async () => {
      const { stream, outcomes } = await open(source([chunk(0), chunk(1, { content: 'a' })], 'done'));
      const r = await drain(stream[Symbol.asyncIterator](), usePoll);
      assert.deepEqual(r.got, [0, 1]);
      assert.ok(r.error instanceof GatewayError);
      assert.equal(r.error.code, 'upstream_stream_truncated');
      assert.deepEqual(outcomes, ['failure', 'stats:failure']);
    });

    test(`${how}: a failure from the source is classified, the source returned, failure recorded once`, async () => {
      const src = source([chunk(0), chunk(1, { content: 'a' })], new Error('socket hang up'));
      const { stream, outcomes, attempt } = await open(src);
      const r = await drain(stream[Symbol.asyncIterator](), usePoll);
      assert.equal((r.error as GatewayError).message, 'classified');
      assert.deepEqual(outcomes, ['failure', 'stats:failure']);
      assert.equal(src.returned, true);
      assert.equal(attempt.abort.aborted, true);
    });
  }

  test('a consumer that returns early (client gone): neutral, upstream aborted, nothing more handed out', async () => {
    const src = source(complete(), 'done');
    const { stream, outcomes, attempt } = await open(src);
    const it = stream[Symbol.asyncIterator]();
    await it.next();
    await it.return?.();
    assert.deepEqual(outcomes, ['neutral']);
    assert.equal(attempt.abort.aborted, true);
    assert.equal(src.returned, true);
    assert.deepEqual(pollable(it)?.poll(), DONE);
  });

  test('a source without poll(): the committed stream answers poll() with undefined once its buffer is used', async () => {
    async function* plain(): AsyncGenerator<P> {
      yield* complete();
    }
    const { stream } = await open(plain());
    const p = pollable(stream[Symbol.asyncIterator]());
    assert.ok(p);
    assert.equal(p.poll()?.value?.chunk.n, 0);
    assert.equal(p.poll()?.value?.chunk.n, 1);
    assert.equal(p.poll(), undefined);
    assert.equal((await p.next()).value?.chunk.n, 2);
  });
});

describe('usage shaping and the end hook keep poll()', () => {
  test('shapeUsage drops the usage chunk and records usage; ended fires once; same through poll() and next()', async () => {
    for (const usePoll of [true, false]) {
      const items = [chunk(0, { content: 'a' }), chunk(1, { finish: true }), ChunkPart.of<C>({ n: 2, choices: [], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } })];
      const sink: { value: Usage | undefined } = { value: undefined };
      let ends = 0;
      const s = ended(shapeUsage(source(items, 'done'), false, sink), new AbortController().signal, () => ends++);
      const r = await drain(s[Symbol.asyncIterator](), usePoll);
      assert.deepEqual(r.got, [0, 1]);
      assert.equal(sink.value?.total_tokens, 7);
      assert.equal(ends, 1);
    }
  });
});
