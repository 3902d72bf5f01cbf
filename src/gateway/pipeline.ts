/**
 * What happens to a request between validation and the router, the same for every operation:
 *
 *   key's model list → cache lookup → limits → coalescing → router → usage accounting → cache store
 *
 * Coalescing joins a flight of this process first; when the store is shared by several processes
 * (workers, replicas on Redis) it then claims the key in the store, following another process's
 * flight (as a local follower would) or leading one that it publishes (state/flights/shared-flights.ts).
 * The claim is made with the cache lookup, in one store operation, when no local flight has the key.
 *
 * A cache hit costs nothing against tokens and budget (it still counts as a request against rpm).
 * Everything else reserves its estimated tokens, takes a concurrency lease and checks the budget
 * before the router sees it; the reservation is reconciled with the real usage when the answer is
 * complete (streams: from the usage chunk), and the lease is released when the client's response
 * ends — on success, error or disconnect. A request that shares another's upstream call (coalesced)
 * is refunded in full: one call is paid for once.
 */
import type { AbortLike } from '../lib/abort.ts';
import { GatewayError, modelNotFound } from '../errors/gateway-error.ts';
import { cacheKey, decide, type CacheDecision, type KeyParts } from '../cache/key.ts';
import { StreamTap } from '../cache/flights.ts';
import type { Entry } from '../cache/response-cache.ts';
import { countPrompt } from '../limits/estimate.ts';
import { RawEmbeddingResponse } from '../protocol/embeddings/schema.ts';
import { Limiter, type Admission, type Principal } from '../limits/limiter.ts';
import { encodingFor } from '../limits/tokens.ts';
import type { ResolvedTarget, Routed, Router } from '../router/router.ts';
import { ended, eventUsage, pump, replay, replayEvents, shapeUsage, type StreamKind } from './pipeline-streams.ts';
import { free, streamAnswer, withHeaders, withServed } from './answers.ts';
import type { ChunkPart, EventPart, StreamPart } from '../protocol/stream-part.ts';
import type { Claim, Lookup } from '../state/flights/shared-flights.ts';

export type { Answer, CacheControl, CacheStatus, Chunk, Job, JobInfo, Served, PipelineServices, StreamResult, Usage } from './types.ts';
import type { Answer, CacheStatus, Chunk, Job, Served, PipelineServices, StreamResult, Usage } from './types.ts';
type UsageLike = { prompt_tokens?: number | null | undefined; completion_tokens?: number | null | undefined };

/** A Chat Completions (or legacy completions, embeddings) answer's usage. */
const chatUsage = (answer: object): UsageLike | null | undefined => (answer as { usage?: UsageLike | null }).usage;

interface Prep {
  principal: Principal | undefined;
  targets: ResolvedTarget[];
  decision: CacheDecision | undefined;
  key: string | undefined;
}

/** A claim taken with the cache lookup but not used: let go (its remote followers make their own call). */
function letGo(pre: Lookup | null | undefined): void {
  pre?.lead?.close();
  pre?.follow?.close();
}

export class Pipeline {
  private readonly principals = new Map<string, Principal>();

  constructor(
    private readonly router: Router,
    private readonly s: PipelineServices,
  ) {
    const cfg = s.config;
    for (const k of cfg.keys ?? []) {
      const ns = cfg.cache.namespace === 'shared' ? 'shared' : k.cache_namespace !== undefined ? `ns:${k.cache_namespace}` : `key:${k.name}`;
      this.principals.set(k.name, { name: k.name, limits: k.limits, models: k.models, namespace: ns });
    }
  }

  principal(keyName: string | undefined): Principal | undefined {
    return keyName === undefined ? undefined : this.principals.get(keyName);
  }

  private prepare(job: Job, stream: boolean, s: PipelineServices): Prep {
    const principal = this.principal(job.info.keyName);
    const model = job.body.model;
    // a model outside the key's list (by the `models:` entry that serves it) answers as if it did not exist
    if (principal?.models && !principal.models.includes(this.router.modelKey(model) ?? model)) throw modelNotFound(model);
    const targets = this.router.resolve(model);
    const cc = job.info.cacheControl ?? { noCache: false, noStore: false };
    const decision = s.cache ? decide(s.cache.cfg, job.op, job.body, cc) : undefined;
    let key: string | undefined;
    if (decision?.use) {
      const parts: KeyParts = {
        op: job.op,
        namespace: principal?.namespace ?? (s.config.cache.namespace === 'shared' ? 'shared' : 'anonymous'),
        model,
        targets: targets.map((t) => `${t.backend}/${t.model}`),
        pin: job.info.pinBackend,
        stream,
        body: job.body,
      };
      key = cacheKey(parts);
    }
    return { principal, targets, decision, key };
  }

  private async estimate(job: Job, prep: Prep): Promise<number> {
    if (prep.principal?.limits?.tpm === undefined) return 0;
    return (await this.promptTokens(job, prep.targets[0]?.model ?? job.body.model)) + job.reserve;
  }

  /**
   * The request's prompt tokens, counted by the tokenizer in the encoding of `model` (the first
   * target's) once per request; the body's size / 4 when the tokenizer fails. Never rejects.
   */
  promptTokens(job: Job, model: string): Promise<number> {
    job.promptCount ??= countPrompt(this.s.tokens, encodingFor(model), job.prompt).catch(() => Math.ceil(job.info.bodyBytes / 4));
    return job.promptCount;
  }

  private async admit(job: Job, prep: Prep, s: PipelineServices, upstream: boolean): Promise<Admission | undefined> {
    const p = prep.principal;
    if (!Limiter.limited(p)) return undefined;
    if (!upstream && p.limits.rpm === undefined && p.limits.tpm === undefined) return undefined;
    return s.limiter.admit(p, upstream ? await this.estimate(job, prep) : 0, upstream);
  }

  /**
   * The cache lookup and, on a miss, the shared claim in one store operation, when no flight of
   * this process has the key (then the cache alone is looked up: a miss joins that flight).
   */
  private async lookup(s: PipelineServices, key: string): Promise<Lookup | null | undefined> {
    const shared = s.flights.shared;
    if (!shared || !s.cache || s.flights.find(key)) return undefined;
    return shared.lookup(key, s.cache.cfg.max_entry_bytes);
  }

  /** The claim the lookup made, else one made now (none when the lookup found the store unreachable). */
  private async claim(s: PipelineServices, key: string, pre: Lookup | null | undefined): Promise<Claim | undefined> {
    if (pre === null) return undefined;
    if (pre?.lead) return { lead: pre.lead };
    if (pre?.follow) return { follow: pre.follow };
    return s.flights.shared?.claim(key, s.cache?.cfg.max_entry_bytes ?? 0);
  }

  /** The admission of a request on its way upstream; a refusal lets its claimed flight go. */
  private async admitClaimed(job: Job, prep: Prep, s: PipelineServices, pre: Lookup | null | undefined): Promise<Admission | undefined> {
    // hot path: no closure or extra promise per request (a .catch() would make both)
    try {
      return await this.admit(job, prep, s, true);
    } catch (err) {
      letGo(pre);
      throw err;
    }
  }

  private hitTarget(prep: Prep, e: Pick<Entry, 'backend' | 'model'>): ResolvedTarget | undefined {
    const t = prep.targets.find((x) => x.backend === e.backend && x.model === e.model) ?? prep.targets[0];
    return t ? free(t) : undefined;
  }

  private status(s: PipelineServices, prep: Prep): CacheStatus | undefined {
    if (!s.cache) return undefined;
    if (!prep.decision?.use) {
      s.cache.stats.bypasses++;
      return 'bypass';
    }
    s.cache.stats.misses++;
    return 'miss';
  }

  /** Built field by field: spreads of undefined and empty objects were a measurable cost per request. */
  private served(adm: Admission | undefined, cache: CacheStatus | undefined, extra?: Record<string, string>): Served {
    const headers: Record<string, string> = {};
    if (adm?.headers) for (const k in adm.headers) headers[k] = adm.headers[k] as string;
    if (cache) headers['x-switchyard-cache'] = cache;
    if (extra) for (const k in extra) headers[k] = extra[k] as string;
    return { cache, headers };
  }

  /** Served by another request's upstream call: refunded in full (one call is paid once), a coalesced hit. */
  private coalesced(s: PipelineServices, adm: Admission | undefined): Served {
    adm?.settle('refund', undefined);
    if (s.cache) {
      s.cache.stats.hits++;
      s.cache.stats.coalesced++;
    }
    return this.served(adm, 'hit', { age: '0', 'x-switchyard-coalesced': 'true' });
  }

  /**
   * A non-streaming answer. `usageOf` reads the answer's usage in the gateway's terms (default: its
   * Chat Completions `usage`; another protocol's answer names its tokens otherwise).
   */
  async once<T extends object>(job: Job, call: (signal: AbortLike) => Promise<Routed<T>>, usageOf: (answer: T) => UsageLike | null | undefined = chatUsage): Promise<Answer<T>> {
    const s = this.s;
    const prep = this.prepare(job, false, s);
    const { key } = prep;
    let pre: Lookup | null | undefined;
    if (s.cache && key !== undefined && prep.decision?.use && prep.decision.read) {
      pre = await this.lookup(s, key);
      const hit = pre?.entry !== undefined ? s.cache.parse(pre.entry) : pre ? undefined : await s.cache.get(key);
      const target = hit?.kind === 'json' ? this.hitTarget(prep, hit) : undefined;
      if (hit?.kind === 'json' && target) {
        const adm = await this.admit(job, prep, s, false);
        s.cache.stats.hits++;
        return { result: hit.body as T, target, attempts: 0, upstreamMs: 0, served: this.served(adm, 'hit', { age: String(s.cache.age(hit)) }) };
      }
    }
    const adm = await this.admitClaimed(job, prep, s, pre);
    try {
      if (!s.cache || key === undefined) {
        const status = this.status(s, prep);
        const r = await call(job.info.signal);
        adm?.settle(usageOf(r.result) ?? undefined, r.target.target.price);
        return withServed(r, this.served(adm, status));
      }
      const joined = s.flights.find<Routed<T>>(key);
      if (joined) {
        letGo(pre);
        const leave = joined.join(job.info.signal);
        try {
          const r = await joined.result;
          // one more response sends the same upstream bytes: they are not recycled before it is done
          if (r.result instanceof RawEmbeddingResponse) r.result.share();
          return { ...r, target: free(r.target), attempts: 0, upstreamMs: 0, served: this.coalesced(s, adm) };
        } finally {
          leave();
        }
      }
      // another process's flight (shared store): its answer, or this request calls by itself
      const claim = await this.claim(s, key, pre);
      const text = await claim?.follow?.json(job.info.signal);
      // a follower that attached as its flight ended unfollowed finds the answer in the cache, stored with the release
      const entry = text !== undefined ? s.cache.parse(text) : claim?.follow && !job.info.signal.aborted ? await s.cache.get(key) : undefined;
      const hitTarget = entry?.kind === 'json' ? this.hitTarget(prep, entry) : undefined;
      if (entry?.kind === 'json' && hitTarget) return { result: entry.body as T, target: hitTarget, attempts: 0, upstreamMs: 0, served: this.coalesced(s, adm) };
      // a follower whose client left while it waited has nobody to call for
      if (claim?.follow && job.info.signal.aborted) throw new GatewayError('client_closed_request');
      const lead = claim?.lead;
      const status = this.status(s, prep);
      const f = s.flights.start<Routed<T>>(key, lead);
      const leave = f.join(job.info.signal);
      f.result = call(f.signal);
      try {
        const r = await f.result;
        adm?.settle(usageOf(r.result) ?? undefined, r.target.target.price);
        const stored = s.cache.jsonText({ backend: r.target.backend, model: r.target.model }, r.result);
        // a store that sees the cache keeps the entry with the flight's release, in one operation
        s.cache.putText(key, stored, lead?.storesAnswers ? (text, ms) => lead.cache(text, ms) : undefined);
        lead?.json(stored);
        return withServed(r, this.served(adm, status));
      } catch (err) {
        lead?.fail(err);
        throw err;
      } finally {
        f.settle();
        s.flights.end(key, f);
        leave();
        lead?.close();
      }
    } catch (err) {
      adm?.settle('refund', undefined);
      throw withHeaders(err, adm?.headers);
    } finally {
      adm?.release();
    }
  }

  /** A streamed answer of chunks (chat, legacy completions); `open` resolves at the router's commit point. */
  stream<C extends Chunk>(job: Job, wantsUsage: boolean, open: (signal: AbortLike) => Promise<Routed<AsyncIterable<ChunkPart<C>>>>): Promise<StreamResult<ChunkPart<C>>> {
    return this.flow(job, open, {
      read: (src, sink) => shapeUsage(src, wantsUsage, sink),
      follow: (tap, leave) => tap.subscribe<C>(leave),
      replay: (entries) => replay<C>(entries),
    });
  }

  /**
   * A stream of forwarded events (a client protocol other than chat, served natively or
   * translated); `open` resolves at the router's commit point. Usage is read from the parts that
   * tell it.
   */
  events(job: Job, open: (signal: AbortLike) => Promise<Routed<AsyncIterable<EventPart>>>): Promise<StreamResult<EventPart>> {
    return this.flow(job, open, {
      read: (src, sink) => eventUsage(src, sink),
      follow: (tap, leave) => tap.subscribeEvents(leave),
      replay: (entries) => replayEvents(entries),
    });
  }

  /**
   * A stream's way through the pipeline, for either kind of part: cache hit (replayed), else
   * limits, then the upstream stream alone or shared through a coalescing log, the usage read on
   * the way (`kind.read`) and accounted when the stream ends however it ends.
   */
  private async flow<P extends StreamPart>(job: Job, open: (signal: AbortLike) => Promise<Routed<AsyncIterable<P>>>, kind: StreamKind<P>): Promise<StreamResult<P>> {
    const sink: { value: Usage | undefined } = { value: undefined };
    const s = this.s;
    const prep = this.prepare(job, true, s);
    const { key } = prep;
    const signal = job.info.signal;
    let pre: Lookup | null | undefined;
    if (s.cache && key !== undefined && prep.decision?.use && prep.decision.read) {
      pre = await this.lookup(s, key);
      const hit = pre?.entry !== undefined ? s.cache.parse(pre.entry) : pre ? undefined : await s.cache.get(key);
      const target = hit?.kind === 'stream' ? this.hitTarget(prep, hit) : undefined;
      if (hit?.kind === 'stream' && target) {
        const adm = await this.admit(job, prep, s, false);
        s.cache.stats.hits++;
        const served = this.served(adm, 'hit', { age: String(s.cache.age(hit)) });
        return { result: kind.read(kind.replay(hit.chunks), sink), usage: sink, target, attempts: 0, upstreamMs: 0, served };
      }
    }
    const adm = await this.admitClaimed(job, prep, s, pre);
    try {
      if (!s.cache || key === undefined) {
        const status = this.status(s, prep);
        const r = await open(signal);
        const price = r.target.target.price;
        const read = kind.read(r.result, sink);
        // without an admission (no limits on this key) there is nothing to settle at the end
        const result = adm
          ? ended(read, signal, () => {
              adm.settle(sink.value, price);
              adm.release();
            })
          : read;
        return streamAnswer(r, result, sink, this.served(adm, status));
      }
      const joined = s.flights.find<Routed<AsyncIterable<P>>>(key);
      const tap = joined?.tap;
      if (joined && tap) {
        letGo(pre);
        const leave = joined.join(signal);
        let r: Routed<AsyncIterable<P>>;
        try {
          r = await joined.result;
        } catch (err) {
          leave();
          throw err;
        }
        const served = this.coalesced(s, adm);
        const result = ended(kind.read(kind.follow(tap, leave), sink), signal, () => {
          adm?.release();
          leave();
        });
        return { ...r, target: free(r.target), attempts: 0, upstreamMs: 0, result, usage: sink, served };
      }
      // another process's flight (shared store): its log replayed then followed, or this request calls by itself
      const claim = await this.claim(s, key, pre);
      const remote = claim?.follow;
      const rtap = remote ? new StreamTap() : undefined;
      const head = rtap && (await remote?.stream(signal, rtap));
      const hitTarget = head ? this.hitTarget(prep, head) : undefined;
      if (remote && rtap && hitTarget) {
        const served = this.coalesced(s, adm);
        const result = ended(kind.read(kind.follow(rtap, () => remote.close()), sink), signal, () => {
          adm?.release();
          remote.close();
        });
        return { result, target: hitTarget, attempts: 0, upstreamMs: 0, usage: sink, served };
      }
      remote?.close();
      if (remote && signal.aborted) throw new GatewayError('client_closed_request');
      // a follower that attached as its flight ended unfollowed finds the answer in the cache, stored with the release
      const late = remote ? await s.cache.get(key) : undefined;
      const lateTarget = late?.kind === 'stream' ? this.hitTarget(prep, late) : undefined;
      if (late?.kind === 'stream' && lateTarget) {
        const served = this.coalesced(s, adm);
        const result = ended(kind.read(kind.replay(late.chunks), sink), signal, () => adm?.release());
        return { result, target: lateTarget, attempts: 0, upstreamMs: 0, usage: sink, served };
      }
      const lead = claim?.lead;
      const status = this.status(s, prep);
      const f = s.flights.start<Routed<AsyncIterable<P>>>(key, lead);
      const own = new StreamTap();
      f.tap = own;
      const leave = f.join(signal);
      f.result = open(f.signal);
      let r: Routed<AsyncIterable<P>>;
      try {
        r = await f.result;
      } catch (err) {
        f.settle();
        s.flights.end(key, f);
        leave();
        lead?.fail(err);
        lead?.close();
        throw err;
      }
      lead?.head(r.target.backend, r.target.model);
      void pump(s, key, f, own, r, adm, lead);
      const result = ended(kind.read(kind.follow(own, leave), sink), signal, () => {
        adm?.release();
        leave();
      });
      return streamAnswer(r, result, sink, this.served(adm, status));
    } catch (err) {
      adm?.settle('refund', undefined);
      adm?.release();
      throw withHeaders(err, adm?.headers);
    }
  }

  /** Public model names this key may use. */
  models(keyName: string | undefined): string[] {
    const all = this.router.publicModels();
    const allowed = this.principal(keyName)?.models;
    return allowed ? all.filter((m) => allowed.includes(m)) : all;
  }
}
