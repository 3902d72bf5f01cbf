import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../errors/gateway-error.ts';
import { responsesProtocol } from '../protocol/responses/index.ts';
import { EventPart } from '../protocol/stream-part.ts';
import { MemoryStore } from '../state/store/memory.ts';
import type { Logger } from '../telemetry/logger.ts';
import { openConversation } from './conversations.ts';
import { inputItemsOf, nextHistory, ResponsesStore } from './responses-store.ts';

function setup() {
  const state = new MemoryStore({ maxEntries: 100, maxBytes: 1 << 20, now: () => 1_800_000_000_000 });
  const responses = new ResponsesStore(state, { ttlSeconds: 3600, maxEntryBytes: 1 << 20, maxTotalBytes: 1 << 24 });
  const warned: string[] = [];
  const logger = { warn: (msg: string) => warned.push(msg) } as unknown as Logger;
  return { deps: { responses, logger }, responses, warned };
}

const output = [{ type: 'message', id: 'msg_a', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'A', annotations: [] }] }];

async function stored(responses: ResponsesStore): Promise<void> {
  await responses.put('alice', 'resp_1', { response: { id: 'resp_1', object: 'response', output }, inputItems: inputItemsOf('Q'), history: nextHistory(undefined, 'Q', output) });
}

async function drain(it: AsyncIterable<EventPart>): Promise<EventPart[]> {
  const out: EventPart[] = [];
  for await (const p of it) out.push(p);
  return out;
}

describe('conversations', () => {
  it('previous_response_id: its history goes ahead of the input, natively without the id', async () => {
    const { deps, responses } = setup();
    await stored(responses);
    const req = responsesProtocol.parse({ model: 'gpt', previous_response_id: 'resp_1', input: 'next' });
    const c = await openConversation(deps, 'alice', req, { requestId: 'req_1' });
    assert.equal(c.turn.conversation?.history.length, 2);
    assert.equal(c.turn.nativeBody.previous_response_id, undefined);
    assert.deepEqual(c.turn.nativeBody.input, [{ role: 'user', content: 'Q' }, output[0], { type: 'message', role: 'user', content: 'next' }]);
  });

  it("an unknown or another key's previous response is a 400; an unknown item reference a 404", async () => {
    const { deps, responses } = setup();
    await stored(responses);
    const prev = responsesProtocol.parse({ model: 'gpt', previous_response_id: 'resp_1', input: 'x' });
    await assert.rejects(openConversation(deps, 'bob', prev, { requestId: 'r' }), (e: unknown) => e instanceof GatewayError && e.status === 400);
    const ref = responsesProtocol.parse({ model: 'gpt', input: [{ type: 'item_reference', id: 'msg_nope' }] });
    await assert.rejects(openConversation(deps, 'alice', ref, { requestId: 'r' }), (e: unknown) => e instanceof GatewayError && e.status === 404);
  });

  it('an item reference is replaced by its stored item', async () => {
    const { deps, responses } = setup();
    await stored(responses);
    const req = responsesProtocol.parse({ model: 'gpt', input: [{ type: 'item_reference', id: 'msg_a' }] });
    const c = await openConversation(deps, 'alice', req, { requestId: 'r' });
    assert.deepEqual(c.turn.nativeBody.input, [output[0]]);
    assert.deepEqual(c.turn.conversation?.resolveItem('msg_a'), output[0]);
  });

  it('answer(): previous_response_id echoed, the response stored under its id for the next turn', async () => {
    const { deps, responses } = setup();
    await stored(responses);
    const c = await openConversation(deps, 'alice', responsesProtocol.parse({ model: 'gpt', previous_response_id: 'resp_1', input: 'next' }), { requestId: 'r' });
    const answer = await c.answer({ id: 'resp_2', object: 'response', previous_response_id: null, output });
    assert.equal(answer.previous_response_id, 'resp_1');
    const rec = await responses.get('alice', 'resp_2');
    assert.equal(rec?.response.previous_response_id, 'resp_1');
    assert.equal(rec?.history.length, 4);
  });

  it('events(): the final response stored before its event is handed on; store: false stores nothing', async () => {
    const { deps, responses } = setup();
    const final = new EventPart('response.completed', JSON.stringify({ type: 'response.completed', response: { id: 'resp_s', object: 'response', output } }), false, true);
    async function* src(): AsyncGenerator<EventPart> {
      yield new EventPart('response.created', '{}');
      yield final;
    }
    const c = await openConversation(deps, 'alice', responsesProtocol.parse({ model: 'gpt', input: 'q' }), { requestId: 'r' });
    assert.equal(c.stored, true);
    const parts = await drain(c.events(src()));
    assert.equal(parts.length, 2);
    assert.ok(await responses.get('alice', 'resp_s'));
    const off = await openConversation(deps, 'alice', responsesProtocol.parse({ model: 'gpt', input: 'q', store: false }), { requestId: 'r' });
    assert.equal(off.stored, false);
    await responses.delete('alice', 'resp_s');
    await drain(off.events(src()));
    assert.equal(await responses.get('alice', 'resp_s'), undefined);
  });
});
