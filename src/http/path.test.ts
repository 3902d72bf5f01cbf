/** normalisePath: the one rule for a request target's spelling (docs/api.md, "Path spelling"). */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { normalisePath } from './path.ts';

describe('normalisePath', () => {
  test('a path already in normal form is returned as it is (the same string)', () => {
    for (const p of ['/', '/v1/chat/completions', '/v1/models/org/model-1.5_x~y', '/health', '/v1/models/a%2Fb']) {
      assert.equal(normalisePath(p), p);
    }
  });

  test('the query string is not part of the path', () => {
    assert.equal(normalisePath('/v1/messages?beta=true'), '/v1/messages');
    assert.equal(normalisePath('/v1/chat/completions?'), '/v1/chat/completions');
    assert.equal(normalisePath('/?x=1'), '/');
    assert.equal(normalisePath('/v1/models/?x=/..//'), '/v1/models');
    assert.equal(normalisePath('/v1/a%63?q=%63'), '/v1/ac');
  });

  test('percent-encoded unreserved characters are decoded, either hex case', () => {
    assert.equal(normalisePath('/v1/chat/%63ompletions'), '/v1/chat/completions');
    assert.equal(normalisePath('/%76%31/%65mbeddings'), '/v1/embeddings');
    assert.equal(normalisePath('/v1/models/a%2db%2Ec%5fd%7Ee%41%7a%30'), '/v1/models/a-b.c_d~eAz0');
  });

  test('other escapes stay as sent: %2F is no separator, and nothing is decoded twice', () => {
    assert.equal(normalisePath('/v1/models/org%2Fmodel'), '/v1/models/org%2Fmodel');
    assert.equal(normalisePath('/v1/models/org%2fmodel'), '/v1/models/org%2fmodel');
    assert.equal(normalisePath('/v1/models/a%20b%3F'), '/v1/models/a%20b%3F');
    assert.equal(normalisePath('/v1/models/%2563'), '/v1/models/%2563');
    assert.equal(normalisePath('/v1/models/%zz%6'), '/v1/models/%zz%6');
  });

  test('runs of slashes are one, and a trailing slash is dropped', () => {
    assert.equal(normalisePath('//v1//chat///completions'), '/v1/chat/completions');
    assert.equal(normalisePath('/v1/chat/completions/'), '/v1/chat/completions');
    assert.equal(normalisePath('/v1/models//?a=b'), '/v1/models');
    assert.equal(normalisePath('//'), '/');
  });

  test('dot segments are resolved, never above the root; dots inside a segment are kept', () => {
    assert.equal(normalisePath('/v1/./models'), '/v1/models');
    assert.equal(normalisePath('/v1/chat/../models'), '/v1/models');
    assert.equal(normalisePath('/../../v1/models'), '/v1/models');
    assert.equal(normalisePath('/v1/models/%2e%2E'), '/v1');
    assert.equal(normalisePath('/v1/models/..x/.y'), '/v1/models/..x/.y');
  });

  test('case is kept', () => {
    assert.equal(normalisePath('/V1/Models'), '/V1/Models');
  });

  test('an absolute-form target is reduced to its path', () => {
    assert.equal(normalisePath('http://gw.example:8080/v1/models?x=1'), '/v1/models');
    assert.equal(normalisePath('https://gw.example'), '/');
    assert.equal(normalisePath('http://gw.example?x'), '/');
  });

  test('what is not a path is left alone (it matches no route)', () => {
    assert.equal(normalisePath('*'), '*');
    assert.equal(normalisePath(''), '');
    assert.equal(normalisePath('v1/models'), 'v1/models');
  });
});
