/**
 * The pool that lends buffers to large upstream answers: exact lengths, reuse of what was given
 * back, and the rules that keep two answers from ever sharing a buffer (a buffer given back twice,
 * or one the pool never lent, is ignored).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BodyPool, sizeClass } from './body-pool.ts';

const KB = 1024;

describe('body pool', () => {
  test('size classes: eighths of a power of two, never smaller than asked', () => {
    assert.equal(sizeClass(64 * KB), 64 * KB);
    assert.equal(sizeClass(64 * KB + 1), 72 * KB);
    assert.equal(sizeClass(312_000), 320 * KB);
    for (const n of [65_537, 100_000, 312_000, 1_000_000, 9_999_999]) {
      const c = sizeClass(n);
      assert.ok(c >= n && c <= n * 1.125 + 1, `${n} → ${c}`);
    }
  });

  test('lends a buffer of exactly the length asked, and the same memory again once it is given back', () => {
    const pool = new BodyPool();
    const a = pool.take(312_000);
    assert.equal(a.length, 312_000);
    a.fill(1);
    pool.give(a);
    const b = pool.take(300_000); // the same size class
    assert.equal(b.length, 300_000);
    assert.equal(b.buffer, a.buffer, 'reused');
    const c = pool.take(300_000);
    assert.notEqual(c.buffer, b.buffer, 'a buffer lent out is not lent twice');
  });

  test('a buffer given back twice is lent once: two answers never share memory', () => {
    const pool = new BodyPool();
    const a = pool.take(100_000);
    pool.give(a);
    pool.give(a);
    const b = pool.take(100_000);
    const c = pool.take(100_000);
    assert.notEqual(b.buffer, c.buffer);
    assert.equal(pool.idleSize, 0);
  });

  test('buffers it did not lend are ignored; small and huge lengths are not pooled', () => {
    const pool = new BodyPool();
    pool.give(Buffer.allocUnsafeSlow(128 * KB));
    assert.equal(pool.idleSize, 0);
    const small = pool.take(1000);
    assert.equal(small.length, 1000);
    pool.give(small);
    assert.equal(pool.idleSize, 0);
  });

  test('idle memory is bounded, and dropped when its size is not asked for again', () => {
    let now = 0;
    const pool = new BodyPool(256 * KB, 1000, () => now);
    const lent = [pool.take(100 * KB), pool.take(100 * KB), pool.take(100 * KB)];
    for (const b of lent) pool.give(b);
    assert.equal(pool.idleSize, 2 * sizeClass(100 * KB), 'the third is over the bound: left to the GC');
    now = 500;
    pool.take(100 * KB); // asked for: kept
    pool.trim();
    assert.equal(pool.idleSize, sizeClass(100 * KB));
    now = 2000;
    pool.trim();
    assert.equal(pool.idleSize, 0);
  });
});
