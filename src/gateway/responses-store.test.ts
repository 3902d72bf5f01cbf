import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryStore } from '../state/store/memory.ts';
import { inputItemsOf, listInputItems, MAX_INDEXED_ITEMS, nextHistory, ResponsesStore, type StoredResponse } from './responses-store.ts';

const DAY = 86_400;

function setup(opts: Partial<{ ttlSeconds: number; maxEntryBytes: number; maxTotalBytes: number }> = {}) {
  let now = 1_800_000_000_000;
  const clock = { advance: (ms: number) => (now += ms) };
  const state = new MemoryStore({ maxEntries: 100, maxBytes: 1 << 20, now: () => now });
  const store = new ResponsesStore(state, { ttlSeconds: 30 * DAY, maxEntryBytes: 1 << 20, maxTotalBytes: 1 << 24, ...opts });
  return { state, store, clock };
}

function rec(id: string, text = 'hello', pad = 0): StoredResponse {
  const output = [{ type: 'message', id: `msg_${id}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `${text}${'x'.repeat(pad)}`, annotations: [] }] }];
  return {
    response: { id, object: 'response', status: 'completed', output, usage: { input_tokens: 3, output_tokens: 1, total_tokens: 4 } },
    inputItems: inputItemsOf('hi'),
    history: nextHistory(undefined, 'hi', output),
  };
}

describe('ResponsesStore (memory)', () => {
  it('returns what was put, for its owner', async () => {
    const { store } = setup();
    const r = rec('resp_1');
    const put = await store.put('alice', 'resp_1', r);
    assert.equal(put.stored, true);
    assert.deepEqual(await store.get('alice', 'resp_1'), r);
  });

  it('keeps owners apart: another owner can neither read nor delete an id', async () => {
    const { store } = setup();
    await store.put('alice', 'resp_1', rec('resp_1', 'for alice'));
    assert.equal(await store.get('bob', 'resp_1'), undefined);
    assert.equal(await store.delete('bob', 'resp_1'), false);
    assert.ok(await store.get('alice', 'resp_1'), 'resp_1 is there');
    // owner names cannot be crafted to reach another owner's key
    await store.put('a:b', 'resp_2', rec('resp_2'));
    assert.equal(await store.get('a', 'b:resp_2'), undefined);
  });

  it('forgets an entry after ttlSeconds', async () => {
    const { store, clock } = setup({ ttlSeconds: 60 });
    await store.put('alice', 'resp_1', rec('resp_1'));
    clock.advance(59_999);
    assert.ok(await store.get('alice', 'resp_1'), 'resp_1 is there');
    clock.advance(1);
    assert.equal(await store.get('alice', 'resp_1'), undefined);
    assert.equal(await store.delete('alice', 'resp_1'), false);
  });

  it('delete removes it: get is undefined, a second delete is false', async () => {
    const { store } = setup();
    await store.put('alice', 'resp_1', rec('resp_1'));
    assert.equal(await store.delete('alice', 'resp_1'), true);
    assert.equal(await store.get('alice', 'resp_1'), undefined);
    assert.equal(await store.delete('alice', 'resp_1'), false);
  });

  it('does not store an entry over maxEntryBytes, and says so', async () => {
    const { store, state } = setup({ maxEntryBytes: 2000 });
    const put = await store.put('alice', 'resp_big', rec('resp_big', 'big', 3000));
    assert.equal(put.stored, false);
    assert.equal(put.stored === false && put.reason, 'too_large');
    assert.ok(put.bytes > 2000, 'put.bytes > 2000');
    assert.equal(await store.get('alice', 'resp_big'), undefined);
    assert.equal(state.blobStats().entries, 0);
  });

  it('stays under maxTotalBytes by evicting the least recently used', async () => {
    // one response's bytes in the blob store: its entry and its item index entries
    const probe = setup();
    await probe.store.put('alice', 'resp_9', rec('resp_9', 'a', 1000));
    const each = probe.state.blobStats().bytes;
    const max = 4 * each + Math.floor(each / 2);
    const { store, state } = setup({ maxTotalBytes: max });
    for (let i = 0; i < 4; i++) {
      const put = await store.put('alice', `resp_${i}`, rec(`resp_${i}`, 'a', 1000));
      assert.equal(put.stored, true);
    }
    assert.equal(state.blobStats().bytes, 4 * each, 'nothing evicted yet');
    // resp_0 read now: resp_1 is the least recently used
    assert.ok(await store.get('alice', 'resp_0'), 'resp_0 is there');
    await store.put('alice', 'resp_4', rec('resp_4', 'a', 1000));
    assert.ok(state.blobStats().bytes <= max, 'state.blobStats().bytes <= max');
    assert.equal(await store.get('alice', 'resp_1'), undefined);
    for (const id of ['resp_0', 'resp_2', 'resp_3', 'resp_4']) assert.ok(await store.get('alice', id), id);
  });

  it('a smaller maxTotalBytes (a reload over the same store) evicts at once', async () => {
    const { store, state } = setup();
    for (let i = 0; i < 4; i++) await store.put('alice', `resp_${i}`, rec(`resp_${i}`, 'a', 1000));
    const smaller = new ResponsesStore(state, { ...store.opts, maxTotalBytes: 5000 });
    assert.ok(state.blobStats().bytes <= 5000, 'state.blobStats().bytes <= 5000');
    assert.ok(await smaller.get('alice', 'resp_3'), 'resp_3 is there');
    assert.equal(await smaller.get('alice', 'resp_0'), undefined);
  });

  it('leaves the response cache and its bounds alone', async () => {
    const { store, state } = setup({ maxTotalBytes: 3000 });
    await state.cacheSet('k', 'cached answer', 60_000);
    for (let i = 0; i < 5; i++) await store.put('alice', `resp_${i}`, rec(`resp_${i}`, 'a', 2000));
    assert.equal(await state.cacheGet('k'), 'cached answer');
  });
});

describe('ResponsesStore item index (item_reference)', () => {
  /** A response whose input has a user message (no id: one is given) and a function call output. */
  function turn(id: string): StoredResponse {
    const input = [
      { role: 'user', content: `question of ${id}` },
      { type: 'function_call_output', id: `fco_${id}`, call_id: 'call_1', output: 'sunny' },
      { type: 'item_reference', id: 'msg_elsewhere' },
    ];
    const output = [
      { type: 'function_call', id: `fc_${id}`, call_id: `call_${id}`, name: 'f', arguments: '{}', status: 'completed' },
      { type: 'message', id: `msg_${id}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `answer of ${id}`, annotations: [] }] },
    ];
    return { response: { id, object: 'response', status: 'completed', output }, inputItems: inputItemsOf(input), history: nextHistory(undefined, input, output) };
  }

  it('resolves output and input items of any stored response of the owner', async () => {
    const { store } = setup();
    const a = turn('resp_a');
    await store.put('alice', 'resp_a', a);
    await store.put('alice', 'resp_b', turn('resp_b'));
    const userMsg = a.inputItems[0] as Record<string, unknown>;
    const got = await store.resolveItems('alice', ['msg_resp_a', 'fc_resp_b', String(userMsg.id), 'fco_resp_a', 'msg_nope']);
    assert.deepEqual([...got.keys()].sort(), ['fc_resp_b', 'fco_resp_a', 'msg_resp_a', String(userMsg.id)].sort());
    assert.deepEqual(got.get('msg_resp_a'), (a.response.output as unknown[])[1]);
    assert.deepEqual(got.get(String(userMsg.id)), userMsg);
    assert.equal(got.has('msg_elsewhere'), false, 'an item reference is not itself an item');
    assert.equal((await store.resolveItems('alice', [])).size, 0);
  });

  it('another owner sees nothing; delete and expiry take the items with the response', async () => {
    const { store, state, clock } = setup({ ttlSeconds: 60 });
    await store.put('alice', 'resp_a', turn('resp_a'));
    await store.put('alice', 'resp_b', turn('resp_b'));
    assert.equal((await store.resolveItems('bob', ['msg_resp_a', 'fc_resp_a'])).size, 0);
    const before = state.blobStats().entries;
    assert.equal(await store.delete('alice', 'resp_a'), true);
    assert.equal(state.blobStats().entries, before - 5, 'the entry and its four index entries are gone');
    assert.equal((await store.resolveItems('alice', ['msg_resp_a', 'fc_resp_a'])).size, 0);
    assert.equal((await store.resolveItems('alice', ['msg_resp_b'])).size, 1);
    clock.advance(60_000);
    assert.equal((await store.resolveItems('alice', ['msg_resp_b'])).size, 0);
  });

  it('an item sent again in a later response points there: deleting the first keeps it resolvable', async () => {
    const { store } = setup();
    const a = turn('resp_a');
    await store.put('alice', 'resp_a', a);
    const replay = (a.response.output as Array<Record<string, unknown>>)[1]!;
    const b: StoredResponse = { response: { id: 'resp_b', object: 'response', output: [] }, inputItems: inputItemsOf([replay]), history: [replay] };
    await store.put('alice', 'resp_b', b);
    assert.deepEqual((await store.resolveItems('alice', ['msg_resp_a'])).get('msg_resp_a'), replay);
    await store.delete('alice', 'resp_a');
    assert.equal((await store.resolveItems('alice', ['msg_resp_a'])).size, 1, 'resp_b still holds it and its pointer stayed');
  });

  it('writes at most MAX_INDEXED_ITEMS index entries per response', async () => {
    const { store, state } = setup();
    const input = Array.from({ length: MAX_INDEXED_ITEMS + 10 }, (_, i) => ({ role: 'user', content: `m${i}` }));
    const r: StoredResponse = { response: { id: 'resp_big', object: 'response', output: [] }, inputItems: inputItemsOf(input), history: input };
    await store.put('alice', 'resp_big', r);
    assert.equal(state.blobStats().entries, 1 + MAX_INDEXED_ITEMS);
  });
});

describe('input items and history', () => {
  it('a string input is one user message with an input_text part and an id', () => {
    const [m, ...rest] = inputItemsOf('hello');
    assert.equal(rest.length, 0);
    assert.equal(m?.type, 'message');
    assert.equal(m?.role, 'user');
    assert.deepEqual(m?.content, [{ type: 'input_text', text: 'hello' }]);
    assert.match(String(m?.id), /^msg_[0-9a-f]+$/);
  });

  it('items keep their ids and fields; easy messages get a type and parts', () => {
    const items = inputItemsOf([
      { role: 'developer', content: 'be brief' },
      { role: 'assistant', content: 'ok' },
      { type: 'function_call_output', call_id: 'call_1', output: '42' },
      { type: 'function_call', id: 'fc_keep', call_id: 'call_1', name: 'f', arguments: '{}' },
    ]);
    assert.deepEqual(items[0]?.content, [{ type: 'input_text', text: 'be brief' }]);
    assert.equal(items[0]?.type, 'message');
    assert.deepEqual(items[1]?.content, [{ type: 'output_text', text: 'ok', annotations: [] }]);
    assert.match(String(items[2]?.id), /^fco_/);
    assert.equal(items[2]?.output, '42');
    assert.equal(items[3]?.id, 'fc_keep');
  });

  it('history grows by the previous history, the input as sent and the output', () => {
    const first = rec('resp_1');
    const h = nextHistory(first, [{ type: 'function_call_output', call_id: 'c', output: 'x' }], [{ type: 'message', id: 'm2' }]);
    assert.deepEqual(h, [...first.history, { type: 'function_call_output', call_id: 'c', output: 'x' }, { type: 'message', id: 'm2' }]);
    assert.deepEqual(first.history[0], { role: 'user', content: 'hi' });
  });

  it('lists input items newest first by default, with cursors and has_more', () => {
    const r: StoredResponse = { response: {}, inputItems: ['a', 'b', 'c', 'd'].map((id) => ({ id, type: 'message' })), history: [] };
    const page1 = listInputItems(r, { limit: 2 });
    assert.deepEqual(
      page1.data.map((x) => (x as { id: string }).id),
      ['d', 'c'],
    );
    assert.equal(page1.object, 'list');
    assert.equal(page1.first_id, 'd');
    assert.equal(page1.last_id, 'c');
    assert.equal(page1.has_more, true);
    const page2 = listInputItems(r, { limit: 2, after: 'c' });
    assert.deepEqual(
      page2.data.map((x) => (x as { id: string }).id),
      ['b', 'a'],
    );
    assert.equal(page2.has_more, false);
    const asc = listInputItems(r, { order: 'asc' });
    assert.deepEqual(
      asc.data.map((x) => (x as { id: string }).id),
      ['a', 'b', 'c', 'd'],
    );
    assert.deepEqual(listInputItems({ ...r, inputItems: [] }), { object: 'list', data: [], first_id: null, last_id: null, has_more: false });
  });
});
