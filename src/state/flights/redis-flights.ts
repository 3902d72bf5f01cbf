/**
 * Shared flights on Redis (replicas on one Redis; the protocol: docs/design/coalescing.md). Each
 * cache key's flights live under one hash tag with the protocol's version (`flightKeys`): the claim,
 * a flight's liveness, its log (a Redis Stream, read with XREAD BLOCK) and its followers; each step
 * is one Lua script. A leader hears of a follower on its process's channel. Keys, scripts and
 * notices: docs/design/redis-flights.md.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { randomHex } from '../../lib/random-id.ts';
import { LeaderNotices } from './flight-notices.ts';
import { runScript, script, type Script } from '../store/redis-scripts.ts';
import { LINGER_MS, READ_WAIT_MS, SharedFlights, WATCH_POLL_MS, type AppendOptions, type FlightDriver, type FlightEntry, type FlightEntryKind, type FlightLookup, type FlightRead } from './shared-flights.ts';

/** The Redis key of a cached entry (the store's cacheGet / cacheSet). */
export const cacheEntryKey = (prefix: string, key: string): string => `${prefix}c:${key}`;

/** Where the flights of cache key `key` live (`*` for a KEYS pattern): their keys start with it. */
export const flightKeys = (prefix: string, key: string): string => `${prefix}{f3:${key}}`;

/** How the store judges Redis: lookups stand in for its cache reads, so they count as they do. */
export interface RedisGate {
  /** whether to send the next command (false: the store serves from its fallback) */
  usable(): boolean;
  ok(): void;
  failed(err: Error): void;
}

/** KEYS: claim, live. ARGV: id, ttl ms. */
const CLAIM = script(`local cur = redis.call('GET', KEYS[1])
if cur then return cur end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return ARGV[1]`);
/** KEYS: cache entry, claim, live. ARGV: id, ttl ms. {1, entry} on a hit, else {0, the claim's holder}. */
const LOOKUP = script(`local e = redis.call('GET', KEYS[1])
if e then return {1, e} end
local cur = redis.call('GET', KEYS[2])
if cur then return {0, cur} end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('SET', KEYS[3], '1', 'PX', ARGV[2])
return {0, ARGV[1]}`);
/**
 * KEYS: claim, log, fol, live, cache entry. ARGV: id, log ttl ms, linger ms (0: the flight goes
 * on), cache ms (0: not cached here), alone ('1': only while no follower is attached, else 0 and
 * nothing done), the cache entry, then each entry's kind and value. With a cache ms the cache
 * entry is stored; with a linger the flight then ends as RELEASE ends it.
 */
const APPEND = script(`if ARGV[5] == '1' and redis.call('SCARD', KEYS[3]) > 0 then return 0 end
if ARGV[4] ~= '0' then redis.call('SET', KEYS[5], ARGV[6], 'PX', ARGV[4]) end
for i = 7, #ARGV, 2 do
  redis.call('XADD', KEYS[2], '*', 'k', ARGV[i], 'v', ARGV[i + 1])
end
if ARGV[3] == '0' then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
redis.call('DEL', KEYS[4])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return 1`);
/** KEYS: claim, log, fol, live. ARGV: id, ttl ms, log ttl ms. */
const REFRESH = script(`if redis.call('PEXPIRE', KEYS[4], ARGV[2]) == 0 then return -1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return redis.call('SCARD', KEYS[3])`);
/** KEYS: claim. ARGV: id. */
const UNCLAIM = script(`if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1`);
/** KEYS: claim, log, fol, live. ARGV: id, linger ms. */
const RELEASE = script(`if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
redis.call('DEL', KEYS[4])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return 1`);

/** Extra time a blocked read is given over its wait. */
const READ_SLACK_MS = 1000;
/** Most idle reading connections kept. */
const IDLE_READERS = 4;
const KINDS: ReadonlySet<string> = new Set<FlightEntryKind>(['h', 'p', 'j', 'e', 'x']);

type StreamReply = Array<[string, Array<[string, string[]]>]> | null;

/** After a failed subscription, flights poll for followers this long before one tries again. */
const RESUBSCRIBE_MS = 5000;
/** Hex digits of a flight id that name its process (the channel its leader hears followers on). */
const TOKEN_CHARS = 12;

export class RedisFlights implements FlightDriver {
  private readonly idle: Redis[] = [];
  private readonly busy = new Set<Redis>();
  private closed = false;
  private readonly token = randomHex(TOKEN_CHARS / 2);
  private readonly notices = new LeaderNotices();
  private sub: Redis | undefined;
  private subscribed: Promise<boolean> | undefined;
  /** whether this process's channel is subscribed (leaders hear of followers without asking) */
  listening = false;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    /** the store's command timeout: a blocked read may take this much longer than its wait */
    private readonly commandTimeoutMs: number,
    private readonly gate?: RedisGate,
  ) {}

  private run(s: Script, keys: string[], args: Array<string | number>): Promise<unknown> {
    return runScript(this.redis, s, keys, args);
  }

  private keys(key: string, id: string): [claim: string, log: string, fol: string, live: string] {
    const base = flightKeys(this.prefix, key);
    return [`${base}:claim`, `${base}:${id}:log`, `${base}:${id}:fol`, `${base}:${id}:live`];
  }

  /** A flight id: this process's token, then random digits. */
  newId(): string {
    return this.token + randomHex(6);
  }

  private channel(id: string): string {
    return `${this.prefix}flights:${id.slice(0, TOKEN_CHARS)}`;
  }

  /** Subscribes this process's channel once (true once subscribed; false when it cannot). */
  private subscription(): Promise<boolean> {
    this.subscribed ??= (async (): Promise<boolean> => {
      const sub = this.redis.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: 1 });
      this.sub = sub;
      sub.on('error', () => {});
      sub.on('message', (_channel: string, id: string) => this.notices.heard(id));
      try {
        await sub.subscribe(this.channel(this.token));
        this.listening = true;
        return true;
      } catch {
        // polled meanwhile; a flight a while later tries again
        sub.disconnect();
        this.sub = undefined;
        setTimeout(() => (this.subscribed = undefined), RESUBSCRIBE_MS).unref();
        return false;
      }
    })();
    return this.subscribed;
  }

  /** `holder` (a claim's answer) is `id`'s: this process leads it and listens for its followers. */
  private leads(id: string, holder: string): string {
    if (holder === id && !this.closed) void this.subscription();
    return this.closed ? holder : this.notices.claimed(id, holder, !this.listening);
  }

  async claim(key: string, id: string, ttlMs: number): Promise<string> {
    if (this.redis.status !== 'ready') throw new Error('redis is not connected');
    const [claim, , , live] = this.keys(key, id);
    return this.leads(id, String(await this.run(CLAIM, [claim, live], [id, ttlMs])));
  }

  async lookup(key: string, id: string, ttlMs: number): Promise<FlightLookup> {
    if (this.redis.status !== 'ready' || this.gate?.usable() === false) throw new Error('redis is not available');
    const [claim, , , live] = this.keys(key, id);
    let r: [number, string];
    try {
      r = (await this.run(LOOKUP, [cacheEntryKey(this.prefix, key), claim, live], [id, ttlMs])) as [number, string];
    } catch (err) {
      this.gate?.failed(err as Error);
      throw err;
    }
    this.gate?.ok();
    return r[0] === 1 ? { entry: String(r[1]) } : { holder: this.leads(id, String(r[1])) };
  }

  async refresh(key: string, id: string, ttlMs: number): Promise<number> {
    return Number(await this.run(REFRESH, this.keys(key, id), [id, ttlMs, ttlMs + LINGER_MS]));
  }

  async append(key: string, id: string, entries: FlightEntry[], ttlMs: number, o?: AppendOptions): Promise<boolean> {
    const args: Array<string | number> = [id, ttlMs, o?.endLingerMs ?? 0, o?.cacheMs === undefined || o.cacheText === undefined ? 0 : Math.max(1, Math.round(o.cacheMs)), o?.alone ? 1 : 0, o?.cacheText ?? ''];
    for (const e of entries) args.push(e.k, e.v);
    const op = this.run(APPEND, [...this.keys(key, id), cacheEntryKey(this.prefix, key)], args).then((r) => Number(r) === 1);
    return this.notices.ending(id, o?.endLingerMs !== undefined, op, (done) => done);
  }

  /**
   * Answers 1 when a follower's attach was heard of on this process's channel, else 0 after
   * `waitMs` (no command sent); without a subscription, polls the follower set (SCARD) every
   * WATCH_POLL_MS.
   */
  async watch(key: string, id: string, waitMs: number): Promise<number> {
    if (!this.notices.leads(id)) return -1;
    if (!(await this.subscription())) {
      const n = await this.redis.scard(this.keys(key, id)[2]);
      if (n === 0) await sleep(Math.min(waitMs, WATCH_POLL_MS), undefined, { ref: false });
      return n;
    }
    if (this.notices.early(id)) {
      const n = await this.redis.scard(this.keys(key, id)[2]);
      if (n > 0) return n;
    }
    return this.notices.wait(id, waitMs);
  }

  async unclaim(key: string, id: string): Promise<void> {
    await this.run(UNCLAIM, [this.keys(key, id)[0]], [id]);
  }

  async release(key: string, id: string, lingerMs: number): Promise<void> {
    await this.notices.ending(id, true, this.run(RELEASE, this.keys(key, id), [id, lingerMs]));
  }

  /** Joins the follower set, and tells the leader's process on its channel. */
  async attach(key: string, id: string, follower: string, ttlMs: number): Promise<void> {
    const [, , fol] = this.keys(key, id);
    await this.redis.pipeline().sadd(fol, follower).pexpire(fol, ttlMs).publish(this.channel(id), id).exec();
  }

  async detach(key: string, id: string, follower: string): Promise<void> {
    await this.redis.srem(this.keys(key, id)[2], follower);
  }

  async read(key: string, id: string, cursor: string, waitMs: number): Promise<FlightRead> {
    const [, log, , live] = this.keys(key, id);
    const from = cursor === '' ? '0-0' : cursor;
    const conn = this.take();
    let reply: StreamReply;
    try {
      reply = (await conn.xread('COUNT', 1000, 'BLOCK', Math.min(waitMs, READ_WAIT_MS), 'STREAMS', log, from)) as StreamReply;
      this.give(conn);
    } catch (err) {
      this.busy.delete(conn);
      conn.disconnect();
      throw err;
    }
    let out = parse(reply, from);
    if (out.entries.length > 0) return out;
    if ((await this.redis.exists(live)) === 1) return out;
    // the flight ended: whatever was appended before it ended is readable now
    out = parse((await this.redis.xread('COUNT', 1000, 'STREAMS', log, from)) as StreamReply, from);
    return { ...out, held: false };
  }

  private take(): Redis {
    const c =
      this.idle.pop() ??
      this.redis.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: 1, commandTimeout: READ_WAIT_MS + READ_SLACK_MS + this.commandTimeoutMs });
    this.busy.add(c);
    return c;
  }

  private give(c: Redis): void {
    this.busy.delete(c);
    if (this.closed || this.idle.length >= IDLE_READERS) c.disconnect();
    else this.idle.push(c);
  }

  close(): void {
    this.closed = true;
    this.notices.clear();
    this.sub?.disconnect();
    for (const c of [...this.idle, ...this.busy]) c.disconnect();
    this.idle.length = 0;
    this.busy.clear();
  }
}

function parse(reply: StreamReply, from: string): FlightRead {
  const entries: FlightEntry[] = [];
  let cursor = from;
  for (const [id, fields] of reply?.[0]?.[1] ?? []) {
    cursor = id;
    let k = '';
    let v = '';
    for (let i = 0; i + 1 < fields.length; i += 2) {
      if (fields[i] === 'k') k = fields[i + 1] ?? '';
      else if (fields[i] === 'v') v = fields[i + 1] ?? '';
    }
    if (KINDS.has(k)) entries.push({ k: k as FlightEntryKind, v });
  }
  return { entries, cursor, held: true };
}

/** The shared flights of a Redis store on its client (`prefix`: state.key_prefix). */
export function redisFlights(redis: Redis, prefix: string, commandTimeoutMs: number, gate?: RedisGate): SharedFlights {
  return new SharedFlights(new RedisFlights(redis, prefix, commandTimeoutMs, gate));
}
