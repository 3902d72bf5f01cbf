/** RouteTable: exact paths, params, methods, `allow`, each route's error envelope, plane and guard. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RouteTable, type ApiHandler, type Guard } from './route-table.ts';

const h = (): ApiHandler => async () => {};

function table(): RouteTable {
  return new RouteTable()
    .area('/v1/messages', 'anthropic')
    .add('POST', '/v1/chat/completions', h())
    .add('GET', '/v1/models', h())
    .add('GET', '/v1/models/{model+}', h())
    .add('POST', '/v1/responses', h())
    .add('GET', '/v1/responses/{id}', h())
    .add('DELETE', '/v1/responses/{id}', h())
    .add('GET', '/v1/responses/{id}/input_items', h())
    .add('POST', '/v1/messages', h())
    .add('POST', '/v1/messages/count_tokens', h())
    .add('POST', '/v1/other', h(), { envelope: 'anthropic' });
}

describe('RouteTable', () => {
  test('an exact path: one shared match without params; its route by method; HEAD is GET', () => {
    const t = table();
    const m = t.find('/v1/chat/completions');
    assert.ok(m);
    assert.equal(m, t.find('/v1/chat/completions'));
    assert.deepEqual(m.params, {});
    assert.equal(m.at.route('POST')?.pattern, '/v1/chat/completions');
    assert.equal(m.at.route('GET'), undefined);
    assert.equal(m.at.allow, 'POST');
    assert.equal(t.find('/v1/models')?.at.route('HEAD')?.method, 'GET');
  });

  test('params: one segment, decoded once', () => {
    const t = table();
    const m = t.find('/v1/responses/resp_1%2Bx');
    assert.deepEqual(m?.params, { id: 'resp_1+x' });
    assert.equal(m?.at.route('GET')?.pattern, '/v1/responses/{id}');
    assert.equal(m?.at.route('DELETE')?.pattern, '/v1/responses/{id}');
    assert.equal(m?.at.allow, 'GET, DELETE');
    const items = t.find('/v1/responses/resp_1/input_items');
    assert.deepEqual(items?.params, { id: 'resp_1' });
    assert.equal(items?.at.route('GET')?.pattern, '/v1/responses/{id}/input_items');
    assert.equal(t.find('/v1/responses/resp_1/other'), undefined);
    assert.equal(t.find('/v1/responses/a/input_items/b'), undefined);
  });

  test('a rest param takes the remaining segments, slashes and escaped slashes alike', () => {
    const t = table();
    assert.deepEqual(t.find('/v1/models/org/model')?.params, { model: 'org/model' });
    assert.deepEqual(t.find('/v1/models/org%2Fmodel')?.params, { model: 'org/model' });
    assert.deepEqual(t.find('/v1/models/100%25%zz')?.params, { model: '100%25%zz' });
    assert.deepEqual(t.find('/v1/models/a%20b')?.params, { model: 'a b' });
    assert.equal(t.find('/v1/models')?.at.pattern, '/v1/models');
  });

  test('no route: undefined', () => {
    const t = table();
    for (const p of ['/v1/chat', '/v1/chat/completions/x', '/v1', '/health', '/v1/model']) assert.equal(t.find(p), undefined, p);
  });

  test('envelopes: the area of a route, its own option, and of a path with no route', () => {
    const t = table();
    assert.equal(t.find('/v1/messages')?.at.route('POST')?.envelope, 'anthropic');
    assert.equal(t.find('/v1/messages/count_tokens')?.at.route('POST')?.envelope, 'anthropic');
    assert.equal(t.find('/v1/messages')?.at.envelope, 'anthropic');
    assert.equal(t.find('/v1/chat/completions')?.at.route('POST')?.envelope, 'openai');
    assert.equal(t.find('/v1/other')?.at.route('POST')?.envelope, 'anthropic');
    assert.equal(t.envelopeOf('/v1/messages/nope/x'), 'anthropic');
    assert.equal(t.envelopeOf('/v1/messagesx'), 'openai');
    assert.equal(t.envelopeOf('/v1/nope'), 'openai');
  });

  test('only POST routes read a body', () => {
    const t = table();
    assert.equal(t.find('/v1/chat/completions')?.at.route('POST')?.readsBody, true);
    assert.equal(t.find('/v1/models')?.at.route('GET')?.readsBody, false);
    assert.equal(t.find('/v1/responses/x')?.at.route('DELETE')?.readsBody, false);
  });

  test('planes and guards: the defaults in force when a route is added, a route\'s own, one per path', () => {
    const client: Guard = () => {};
    const admin: Guard = () => {};
    const t = new RouteTable()
      .defaults({ plane: 'api', guard: client })
      .add('POST', '/v1/chat/completions', h())
      .add('GET', '/v1/models', h())
      .defaults({ plane: 'admin', guard: undefined })
      .add('GET', '/health', h())
      .add('GET', '/status', h(), { guard: admin });
    const chat = t.find('/v1/chat/completions')?.at;
    assert.equal(chat?.route('POST')?.plane, 'api');
    assert.equal(chat?.guard, client);
    assert.equal(t.find('/health')?.at.route('GET')?.plane, 'admin');
    assert.equal(t.find('/health')?.at.guard, undefined);
    assert.equal(t.find('/status')?.at.guard, admin);
    assert.equal(t.find('/status')?.at.plane, 'admin');
    assert.equal(new RouteTable().add('GET', '/x', h()).find('/x')?.at.plane, 'api', 'the API plane, open, without defaults');
    assert.throws(() => t.add('POST', '/status', h()), /same plane and guard/);
    assert.throws(() => t.add('POST', '/v1/models', h(), { plane: 'admin' }), /same plane and guard/);
  });

  test('a route registered twice, or a pattern that is not a normalised path, is refused', () => {
    assert.throws(() => table().add('POST', '/v1/chat/completions', h()), /twice/);
    assert.throws(() => new RouteTable().add('GET', '/v1/models/', h()), /normalised/);
    assert.throws(() => new RouteTable().add('GET', '/v1/{a+}/b', h()), /last segment/);
  });
});
