/**
 * Stored Responses on Redis: what one replica stores another reads (previous_response_id on any
 * replica), per owner, with the key's expiry as the TTL and keys under the store's prefix; and what
 * happens while Redis is unreachable (open: this replica's memory, else 503 state_unavailable;
 * closed: nothing stored). A `redis-server` on a free loopback port, stopped by its pid.
 * In CI (CI set) a missing redis-server is a failure, never a skip.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { GatewayError } from '../src/errors/gateway-error.ts';
import { inputItemsOf, nextHistory, ResponsesStore, type StoredResponse } from '../src/gateway/responses-store.ts';
import { RedisStore } from '../src/state/store/redis.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { freePort } from './support/net.ts';
import { RedisServer, redisSkip, until } from './support/redis-server.ts';

const skip = redisSkip;
const PREFIX = 'sy-resp-test:';
const OPTS = { ttlSeconds: 30 * 86_400, maxEntryBytes: 1 << 20, maxTotalBytes: 1 << 24 };

function redisStore(port: number, onUnavailable: 'open' | 'closed' = 'open'): RedisStore {
  return new RedisStore({
    url: `redis://127.0.0.1:${port}`,
    keyPrefix: PREFIX,
    onUnavailable,
    commandTimeoutMs: 1000,
    maxEntries: 100,
    maxBytes: 1 << 20,
    logger: createLogger('silent'),
  });
}

function rec(id: string, text = 'hello'): StoredResponse {
  const output = [{ type: 'message', id: `msg_${id}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] }];
  return { response: { id, object: 'response', status: 'completed', output }, inputItems: inputItemsOf('hi'), history: nextHistory(undefined, 'hi', output) };
}

function isUnavailable(err: unknown): boolean {
  return err instanceof GatewayError && err.status === 503 && err.code === 'state_unavailable';
}

describe('stored responses on redis', { skip }, () => {
  let dir = '';
  let port = 0;
  let server: RedisServer | undefined;
  let a: RedisStore | undefined;
  let b: RedisStore | undefined;
  let raw: Redis | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-resp-redis-'));
    server = await RedisServer.start(dir);
    port = server.port;
    a = redisStore(port);
    b = redisStore(port);
    assert.equal(await a.ready(5000), true);
    assert.equal(await b.ready(5000), true);
    raw = new Redis(`redis://127.0.0.1:${port}`);
  });

  after(async () => {
    raw?.disconnect();
    await a?.close();
    await b?.close();
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('one replica stores, another reads it; another owner gets nothing and deletes nothing', async () => {
    const one = new ResponsesStore(a!, OPTS);
    const two = new ResponsesStore(b!, OPTS);
    const r = rec('resp_shared');
    assert.equal((await one.put('alice', 'resp_shared', r)).stored, true);
    assert.deepEqual(await two.get('alice', 'resp_shared'), r);
    assert.equal(await two.get('bob', 'resp_shared'), undefined);
    assert.equal(await two.delete('bob', 'resp_shared'), false);
    assert.ok(await one.get('alice', 'resp_shared'), 'resp_shared is there');
  });

  it('the key is under the store prefix and expires after ttlSeconds', async () => {
    const s = new ResponsesStore(a!, { ...OPTS, ttlSeconds: 3600 });
    await s.put('alice', 'resp_ttl', rec('resp_ttl'));
    const pttl = await raw!.pttl(`${PREFIX}b:resp:alice:resp_ttl`);
    assert.ok(pttl > 0 && pttl <= 3_600_000, `pttl ${pttl}`);
  });

  it('delete on one replica is seen by the other', async () => {
    const one = new ResponsesStore(a!, OPTS);
    const two = new ResponsesStore(b!, OPTS);
    await one.put('alice', 'resp_del', rec('resp_del'));
    assert.equal(await two.delete('alice', 'resp_del'), true);
    assert.equal(await one.get('alice', 'resp_del'), undefined);
    assert.equal(await one.delete('alice', 'resp_del'), false);
  });

  it('an entry over maxEntryBytes is not written', async () => {
    const s = new ResponsesStore(a!, { ...OPTS, maxEntryBytes: 100 });
    const put = await s.put('alice', 'resp_big', rec('resp_big', 'x'.repeat(500)));
    assert.equal(put.stored === false && put.reason, 'too_large');
    assert.equal(await raw!.exists(`${PREFIX}b:resp:alice:resp_big`), 0);
  });

  it('item_reference index: one replica stores, another resolves; per owner, under the prefix, with the TTL, gone with DELETE', async () => {
    const one = new ResponsesStore(a!, { ...OPTS, ttlSeconds: 3600 });
    const two = new ResponsesStore(b!, OPTS);
    const r = rec('resp_items', 'indexed answer');
    await one.put('alice', 'resp_items', r);
    const inputId = String((r.inputItems[0] as Record<string, unknown>).id);
    const got = await two.resolveItems('alice', ['msg_resp_items', inputId, 'msg_nope']);
    assert.deepEqual([...got.keys()].sort(), ['msg_resp_items', inputId].sort());
    assert.equal(((got.get('msg_resp_items')?.content as Array<Record<string, unknown>>)[0])?.text, 'indexed answer');
    assert.equal((await two.resolveItems('bob', ['msg_resp_items', inputId])).size, 0, 'another owner sees nothing');
    const pttl = await raw!.pttl(`${PREFIX}b:ritem:alice:msg_resp_items`);
    assert.ok(pttl > 0 && pttl <= 3_600_000, `pttl ${pttl}`);
    assert.equal(await two.delete('alice', 'resp_items'), true);
    assert.equal((await one.resolveItems('alice', ['msg_resp_items', inputId])).size, 0);
    assert.equal(await raw!.exists(`${PREFIX}b:ritem:alice:msg_resp_items`, `${PREFIX}b:ritem:alice:${inputId}`), 0, 'the index entries were deleted');
  });

  it('Redis down (open): kept in this replica meanwhile; an answer only Redis has is a 503, not a 404', async () => {
    const one = new ResponsesStore(a!, OPTS);
    await one.put('alice', 'resp_before', rec('resp_before'));
    await server!.stop();
    await until('the store notices', () => a!.status().state === 'degraded');
    const put = await one.put('alice', 'resp_during', rec('resp_during'));
    assert.equal(put.stored, true);
    assert.ok(await one.get('alice', 'resp_during'), 'resp_during is there');
    await assert.rejects(one.get('alice', 'resp_before'), isUnavailable);
    await assert.rejects(one.delete('alice', 'resp_before'), isUnavailable);
    await assert.rejects(one.resolveItems('alice', ['msg_resp_before']), isUnavailable, 'unknown is not the same as not found');
    await server?.launch();
    await until('the store recovers', () => a!.status().state === 'ok');
    // kept locally while Redis was down, still found after it is back
    assert.ok(await one.get('alice', 'resp_during'), 'resp_during is there');
  });
});

describe('stored responses, redis unreachable with on_unavailable: closed', () => {
  it('nothing is stored (put says so) and reads are 503 state_unavailable', async () => {
    const store = redisStore(await freePort(), 'closed');
    try {
      const s = new ResponsesStore(store, OPTS);
      const put = await s.put('alice', 'resp_x', rec('resp_x'));
      assert.equal(put.stored === false && put.reason, 'unavailable');
      await assert.rejects(s.get('alice', 'resp_x'), isUnavailable);
      await assert.rejects(s.delete('alice', 'resp_x'), isUnavailable);
    } finally {
      await store.close();
    }
  });
});
