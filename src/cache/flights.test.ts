import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ChunkPart, PlainHead } from '../protocol/stream-part.ts';
import { Flights, StreamTap } from './flights.ts';

/** The chunks of a subscriber's parts. */
async function collect<T extends object>(it: AsyncIterable<ChunkPart<T>>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x.edit());
  return out;
}

describe('Flight', () => {
  it('aborts the shared call only when every participant has gone', () => {
    const flights = new Flights(true);
    const f = flights.start<number>('k');
    const leader = new AbortController();
    const follower = new AbortController();
    f.join(leader.signal);
    assert.equal(flights.find('k'), f);
    f.join(follower.signal);
    leader.abort();
    assert.equal(f.signal.aborted, false, 'the follower still listens');
    follower.abort();
    assert.equal(f.signal.aborted, true);
    assert.equal(flights.find('k'), undefined, 'an aborted flight cannot be joined');
  });

  it('leaving after the call settled aborts nothing', () => {
    const flights = new Flights(true);
    const f = flights.start<number>('k');
    const leave = f.join(new AbortController().signal);
    f.settle();
    leave();
    assert.equal(f.signal.aborted, false);
    assert.equal(flights.find('k'), undefined);
  });

  it('without coalescing a flight is never found', () => {
    const flights = new Flights(false);
    flights.start('k');
    assert.equal(flights.find('k'), undefined);
  });
});

describe('StreamTap', () => {
  it('a late subscriber gets the chunks so far, then the live ones; each gets its own copies', async () => {
    const tap = new StreamTap();
    tap.push(ChunkPart.of({ n: 1 }));
    const early = collect(tap.subscribe<{ n: number }>(() => {}));
    tap.push(ChunkPart.of({ n: 2 }));
    const late = collect(tap.subscribe<{ n: number }>(() => {}));
    tap.push(ChunkPart.of({ n: 3 }));
    tap.finish();
    const a = await early;
    const b = await late;
    assert.deepEqual(a, [{ n: 1 }, { n: 2 }, { n: 3 }]);
    assert.deepEqual(b, a);
    assert.notEqual(a[0], b[0]);
  });

  it('the log holds each part text as it will be written; a subscriber forwards that text, a plain one unparsed', async () => {
    const tap = new StreamTap();
    const token = '{"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}],"usage":null}';
    tap.push(ChunkPart.parsed({ a: 1 }, '{"a": 1.0}'));
    tap.push(ChunkPart.plain(token, new PlainHead()) as ChunkPart<object>);
    tap.finish();
    assert.deepEqual(tap.chunks, ['{"a": 1.0}', token]);
    const parts: ChunkPart<object>[] = [];
    for await (const p of tap.subscribe<object>(() => {})) parts.push(p);
    assert.deepEqual(
      parts.map((p) => [p.json(), p.plain]),
      [
        ['{"a": 1.0}', false],
        [token, true],
      ],
    );
  });

  it('a failure reaches every subscriber after the chunks before it', async () => {
    const tap = new StreamTap();
    const sub = tap.subscribe<{ n: number }>(() => {})[Symbol.asyncIterator]();
    tap.push(ChunkPart.of({ n: 1 }));
    tap.finish(new Error('boom'));
    const first = await sub.next();
    assert.deepEqual(first.done ? undefined : first.value.chunk, { n: 1 });
    await assert.rejects(sub.next(), /boom/);
  });

  it('return() closes a waiting subscriber at once and calls onClose once', async () => {
    const tap = new StreamTap();
    let closed = 0;
    const it = tap.subscribe<{ n: number }>(() => closed++)[Symbol.asyncIterator]();
    const pending = it.next();
    await it.return?.();
    assert.deepEqual(await pending, { done: true, value: undefined });
    await it.return?.();
    assert.equal(closed, 1);
  });
});
