/**
 * The coalescer: identical cacheable requests in flight at the same moment share one upstream
 * call. A request joins a flight of this process (cache/flights.ts) when there is one; else, when
 * the store is shared by several processes, it claims the key there and leads, or follows the
 * flight of the process that holds the claim (state/flights/); a follower that came too late reads
 * the answer the flight stored in the cache. Each operation says who served the request.
 * The protocol between processes: docs/design/coalescing.md.
 */
import type { AbortLike } from '../lib/abort.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { StreamTap, type Flight, type Flights } from '../cache/flights.ts';
import type { Entry, ResponseCache } from '../cache/response-cache.ts';
import type { Admission } from '../limits/limiter.ts';
import { RawEmbeddingResponse } from '../protocol/embeddings/schema.ts';
import type { StreamPart } from '../protocol/stream-part.ts';
import type { ResolvedTarget, Routed } from '../router/router.ts';
import type { Claim, FlightLead, Lookup } from '../state/flights/shared-flights.ts';
import { free, servedTarget } from './answers.ts';
import type { StreamKind } from './pipeline-streams.ts';
import type { Usage } from './types.ts';

/**
 * Who served a request that went through coalescing: `lead`, its own upstream call (identical
 * requests may have shared it); `joined`, a flight of this process; `followed`, another process's
 * flight, read through the store; `late`, the answer another process's flight left in the cache.
 * Only `lead` is this request's to pay for.
 */
export type ServedBy = 'lead' | 'joined' | 'followed' | 'late';

export interface Coalesced<R> {
  by: ServedBy;
  routed: R;
}

export interface CoalescedStream<P extends StreamPart> extends Coalesced<Routed<AsyncIterable<P>>> {
  /** To call once the client's stream ends, however it ends: gives the request's place back. */
  done: () => void;
}

const NOTHING = (): void => {};

/** Built once per pipeline, when the cache is on (a cache key is what identical requests share). */
export class Coalescer {
  constructor(
    private readonly flights: Flights,
    private readonly cache: ResponseCache,
  ) {}

  /** One request's way through the cache lookup and coalescing, under its cache key. */
  begin(key: string): Coalescing {
    return new Coalescing(this.flights, this.cache, key);
  }
}

/**
 * One request under its cache key: `lookup` (the cache step), then `letGo` (refused by the limits)
 * or one of `once` / `stream`.
 */
export class Coalescing {
  /**
   * The shared claim the lookup took in its store operation: null when the store could not be
   * reached, undefined when none was taken (the operation claims then).
   */
  private pre: Lookup | null | undefined;

  constructor(
    private readonly flights: Flights,
    private readonly cache: ResponseCache,
    readonly key: string,
  ) {}

  /**
   * The entry cached under the key. On a miss, when no flight of this process has the key and the
   * store is shared, the store has claimed the key for this request in the same operation.
   */
  async lookup(): Promise<Entry | undefined> {
    const shared = this.flights.shared;
    const pre = shared && !this.flights.find(this.key) ? await shared.lookup(this.key, this.cache.cfg.max_entry_bytes) : undefined;
    this.pre = pre;
    if (!pre) return this.cache.get(this.key);
    return pre.entry !== undefined ? this.cache.parse(pre.entry) : undefined;
  }

  /** The request goes no further (the limits refused it): the claim is let go, its followers make their own call. */
  letGo(): void {
    this.pre?.lead?.close();
    this.pre?.follow?.close();
  }

  /** A JSON answer: shared with a flight in flight, else this request's `call`, shared with those that come. */
  async once<T>(signal: AbortLike, call: (signal: AbortLike) => Promise<Routed<T>>, targets: readonly ResolvedTarget[]): Promise<Coalesced<Routed<T>>> {
    const { key, cache, flights } = this;
    const joined = flights.find<Routed<T>>(key);
    if (joined) {
      this.letGo();
      const leave = joined.join(signal);
      try {
        const r = await joined.result;
        // one more response sends the same upstream bytes: they are not recycled before it is done
        if (r.result instanceof RawEmbeddingResponse) r.result.share();
        this.servedByOthers();
        return { by: 'joined', routed: { result: r.result, target: free(r.target), attempts: 0, upstreamMs: 0 } };
      } finally {
        leave();
      }
    }
    const claim = await this.claim();
    const remote = claim?.follow;
    if (remote) {
      const text = await remote.json(signal);
      // a follower that attached as its flight ended unfollowed finds the answer in the cache, stored with the release
      const entry = text !== undefined ? cache.parse(text) : !signal.aborted ? await cache.get(key) : undefined;
      const target = entry?.kind === 'json' ? servedTarget(targets, entry) : undefined;
      if (entry?.kind === 'json' && target) {
        this.servedByOthers();
        return { by: text !== undefined ? 'followed' : 'late', routed: { result: entry.body as T, target, attempts: 0, upstreamMs: 0 } };
      }
      // a follower whose client left while it waited has nobody to call for
      if (signal.aborted) throw new GatewayError('client_closed_request');
    }
    const lead = claim?.lead;
    cache.stats.misses++;
    const f = flights.start<Routed<T>>(key, lead);
    const leave = f.join(signal);
    f.result = call(f.signal);
    try {
      const r = await f.result;
      const stored = cache.jsonText({ backend: r.target.backend, model: r.target.model }, r.result);
      // a store that sees the cache keeps the entry with the flight's release, in one operation
      cache.putText(key, stored, lead?.storesAnswers ? (text, ms) => lead.cache(text, ms) : undefined);
      lead?.json(stored);
      return { by: 'lead', routed: r };
    } catch (err) {
      lead?.fail(err);
      throw err;
    } finally {
      f.settle();
      flights.end(key, f);
      leave();
      lead?.close();
    }
  }

  /**
   * A stream: a flight's log from its first part, then live, else this request's `open`, read to its
   * end by the coalescer whoever still listens. `adm` (the leader's admission) is settled when that
   * upstream stream ends, with the usage it told.
   */
  async stream<P extends StreamPart>(
    signal: AbortLike,
    open: (signal: AbortLike) => Promise<Routed<AsyncIterable<P>>>,
    kind: StreamKind<P>,
    adm: Admission | undefined,
    targets: readonly ResolvedTarget[],
  ): Promise<CoalescedStream<P>> {
    const { key, cache, flights } = this;
    const joined = flights.find<Routed<AsyncIterable<P>>>(key);
    const tap = joined?.tap;
    if (joined && tap) {
      this.letGo();
      const leave = joined.join(signal);
      let r: Routed<AsyncIterable<P>>;
      try {
        r = await joined.result;
      } catch (err) {
        leave();
        throw err;
      }
      this.servedByOthers();
      return { by: 'joined', routed: { result: kind.follow(tap, leave), target: free(r.target), attempts: 0, upstreamMs: 0 }, done: leave };
    }
    const claim = await this.claim();
    const remote = claim?.follow;
    if (remote) {
      const rtap = new StreamTap();
      const head = await remote.stream(signal, rtap);
      const target = head ? servedTarget(targets, head) : undefined;
      if (target) {
        this.servedByOthers();
        const close = (): void => remote.close();
        return { by: 'followed', routed: { result: kind.follow(rtap, close), target, attempts: 0, upstreamMs: 0 }, done: close };
      }
      remote.close();
      if (signal.aborted) throw new GatewayError('client_closed_request');
      // a follower that attached as its flight ended unfollowed finds the answer in the cache, stored with the release
      const late = await cache.get(key);
      const lateTarget = late?.kind === 'stream' ? servedTarget(targets, late) : undefined;
      if (late?.kind === 'stream' && lateTarget) {
        this.servedByOthers();
        return { by: 'late', routed: { result: kind.replay(late.chunks), target: lateTarget, attempts: 0, upstreamMs: 0 }, done: NOTHING };
      }
    }
    const lead = claim?.lead;
    cache.stats.misses++;
    const f = flights.start<Routed<AsyncIterable<P>>>(key, lead);
    const own = new StreamTap();
    f.tap = own;
    const leave = f.join(signal);
    f.result = open(f.signal);
    let r: Routed<AsyncIterable<P>>;
    try {
      r = await f.result;
    } catch (err) {
      f.settle();
      flights.end(key, f);
      leave();
      lead?.fail(err);
      lead?.close();
      throw err;
    }
    lead?.head(r.target.backend, r.target.model);
    void this.pump(f, own, r, adm, lead);
    return { by: 'lead', routed: { result: kind.follow(own, leave), target: r.target, attempts: r.attempts, upstreamMs: r.upstreamMs }, done: leave };
  }

  /** The claim the lookup took, else one taken now (none when the store is not shared or not reached). */
  private async claim(): Promise<Claim | undefined> {
    const pre = this.pre;
    if (pre === null) return undefined;
    if (pre?.lead) return { lead: pre.lead };
    if (pre?.follow) return { follow: pre.follow };
    return this.flights.shared?.claim(this.key, this.cache.cfg.max_entry_bytes);
  }

  /** Served by another request's upstream call: a cache hit, and a coalesced one. */
  private servedByOthers(): void {
    this.cache.stats.hits++;
    this.cache.stats.coalesced++;
  }

  /**
   * Reads the led upstream stream into its tap (and publishes it for other processes' followers
   * through `lead`), whoever is listening; then accounts for it (the leader's key pays) and caches
   * it when it ended cleanly.
   */
  private async pump<P extends StreamPart>(
    f: Flight<Routed<AsyncIterable<P>>>,
    tap: StreamTap,
    r: Routed<AsyncIterable<P>>,
    adm: Admission | undefined,
    lead: FlightLead | undefined,
  ): Promise<void> {
    const { key, cache, flights } = this;
    const flight = f as Flight<unknown>;
    let usage: Usage | undefined;
    const max = cache.cfg.max_entry_bytes;
    try {
      for await (const part of r.result) {
        const u = part.kind === 'chunk' ? (part.usage() as Usage | null | undefined) : part.usage;
        if (u) usage = u;
        const text = tap.push(part);
        lead?.part(text);
        // too big to cache: late joiners could not be served from the log either
        if (tap.bytes > max) flights.end(key, flight);
      }
      tap.finish();
      lead?.end();
      adm?.settle(usage, r.target.target.price);
      // a store that sees the cache keeps the entry with the flight's release, in one operation
      const via = lead?.storesAnswers ? (text: string, ms: number) => lead.cache(text, ms) : undefined;
      if (tap.bytes <= max) cache.putStream(key, { backend: r.target.backend, model: r.target.model }, tap.chunks, via);
    } catch (err) {
      tap.finish(err);
      lead?.fail(err);
      adm?.settle(usage, r.target.target.price);
    } finally {
      f.settle();
      flights.end(key, flight);
      lead?.close();
    }
  }
}
