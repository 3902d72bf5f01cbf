/** ClientAbort behaves as an AbortSignal does for the gateway's uses; the abortable sleep cleans up. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ClientAbort, sleepUnlessAborted, type AbortLike } from './abort.ts';

describe('ClientAbort', () => {
  test('listeners fire once, in order, with aborted and reason set; removed ones and late ones never', () => {
    const a = new ClientAbort();
    const seen: string[] = [];
    const one = (): void => void seen.push(`one:${String(a.aborted)}:${String(a.reason)}`);
    const two = (): void => void seen.push('two');
    const gone = (): void => void seen.push('removed');
    a.addEventListener('abort', one, { once: true });
    a.addEventListener('abort', gone);
    a.addEventListener('abort', two);
    a.removeEventListener('abort', gone);
    a.abort('bye');
    a.abort('again');
    a.addEventListener('abort', () => seen.push('late'));
    assert.deepEqual(seen, ['one:true:bye', 'two']);
    assert.equal(a.reason, 'bye');
  });

  test('an AbortSignal is an AbortLike too', () => {
    const c = new AbortController();
    const s: AbortLike = c.signal;
    let fired = false;
    s.addEventListener('abort', () => (fired = true), { once: true });
    c.abort('r');
    assert.equal(fired, true);
  });
});

describe('sleepUnlessAborted', () => {
  test('resolves after the time and leaves no listener behind', async () => {
    const a = new ClientAbort();
    await sleepUnlessAborted(5, a);
    let fired = false;
    a.addEventListener('abort', () => (fired = true));
    a.abort('later');
    assert.equal(fired, true, 'only the test listener was there');
  });

  test('rejects with the reason when aborted first, or at once when already aborted', async () => {
    const a = new ClientAbort();
    const p = sleepUnlessAborted(10_000, a);
    a.abort('client gone');
    await assert.rejects(p, (e) => e === 'client gone');
    await assert.rejects(sleepUnlessAborted(10_000, a), (e) => e === 'client gone');
  });
});
