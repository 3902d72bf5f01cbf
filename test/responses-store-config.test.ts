/**
 * The `responses:` block of providers.yaml reaches the gateway's stored responses: defaults as
 * OpenAI (30 days), the configured bounds, bad values rejected with their path, and stored
 * responses surviving a config reload (the state store is kept; a smaller bound evicts at once).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { parseConfig } from '../src/config/load.ts';
import { inputItemsOf, type StoredResponse } from '../src/gateway/responses-store.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';

const BASE = `
backends:
  demo: { type: fake }
models:
  chat: { targets: [ { backend: demo, model: echo } ] }
`;

function rec(id: string, pad = 0): StoredResponse {
  const output = [{ type: 'message', id: `msg_${id}`, role: 'assistant', content: [{ type: 'output_text', text: 'x'.repeat(pad), annotations: [] }] }];
  return { response: { id, object: 'response', status: 'completed', output }, inputItems: inputItemsOf('hi'), history: output };
}

describe('responses: config', () => {
  let gw: TestGateway | undefined;
  after(async () => gw?.close());

  it('defaults: 30 days, 256 MiB in memory, 16 MiB per response', () => {
    const { config } = parseConfig(BASE, 'test.yaml', {});
    assert.deepEqual(config.responses, { store_ttl_seconds: 2_592_000, max_stored_bytes: 268_435_456, max_response_bytes: 16_777_216 });
  });

  it('rejects a bound that is not a positive integer, naming it', () => {
    assert.throws(
      () => parseConfig(`${BASE}responses: { max_stored_bytes: 0 }\n`, 'test.yaml', {}),
      (err: Error) => /responses\.max_stored_bytes/.test(err.message),
    );
    assert.throws(
      () => parseConfig(`${BASE}responses: { store_ttl: 60 }\n`, 'test.yaml', {}),
      (err: Error) => /responses/.test(err.message) && /store_ttl/.test(err.message),
    );
  });

  it('the gateway stores by it, and stored responses survive a reload', async () => {
    gw = await startGateway(`${BASE}responses: { store_ttl_seconds: 3600, max_stored_bytes: 100000, max_response_bytes: 5000 }\n`);
    const before = gw.running.deps.responses;
    assert.deepEqual(before.opts, { ttlSeconds: 3600, maxEntryBytes: 5000, maxTotalBytes: 100_000 });
    assert.equal((await before.put('alice', 'resp_big', rec('resp_big', 6000))).stored, false);
    for (let i = 0; i < 10; i++) assert.equal((await before.put('alice', `resp_${i}`, rec(`resp_${i}`, 1500))).stored, true);

    const res = await gw.running.generations.reload(parseConfig(`${BASE}responses: { store_ttl_seconds: 3600, max_stored_bytes: 8000, max_response_bytes: 5000 }\n`, 'test.yaml', {}));
    assert.equal(res.ok, true, JSON.stringify(res));
    const afterReload = gw.running.deps.responses;
    assert.notEqual(afterReload, before);
    assert.equal(afterReload.opts.maxTotalBytes, 8000);
    // the newest two fit the smaller bound and are still there; the oldest went
    assert.ok(await afterReload.get('alice', 'resp_9'), 'resp_9 survives the reload');
    assert.ok(await afterReload.get('alice', 'resp_8'), 'resp_8 survives the reload');
    assert.equal(await afterReload.get('alice', 'resp_0'), undefined);
  });
});
