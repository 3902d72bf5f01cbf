/**
 * What happens to a request between validation and the router, the same for every operation:
 *
 *   key's model list → cache lookup → limits → coalescing → router → usage accounting → cache store
 *
 * Coalescing (identical requests in flight share one upstream call, across processes when the store
 * is shared) is the coalescer's (coalescer.ts): it says who served the request, and stores what it
 * led in the cache. Its cache lookup also claims the key in a shared store, in the same operation.
 *
 * A cache hit costs nothing against tokens and budget (it still counts as a request against rpm).
 * Everything else reserves its estimated tokens, takes a concurrency lease and checks the budget
 * before the router sees it; the reservation is reconciled with the real usage when the answer is
 * complete (streams: from the usage chunk), and the lease is released when the client's response
 * ends — on success, error or disconnect. A request that shares another's upstream call (coalesced)
 * is refunded in full: one call is paid for once.
 */
import type { AbortLike } from '../lib/abort.ts';
import { modelNotFound } from '../errors/gateway-error.ts';
import { cacheKey, decide, type CacheDecision, type KeyParts } from '../cache/key.ts';
import type { Entry, ResponseCache } from '../cache/response-cache.ts';
import { countPrompt } from '../limits/estimate.ts';
import { Limiter, type Admission, type Principal } from '../limits/limiter.ts';
import { encodingFor } from '../limits/tokens.ts';
import type { ResolvedTarget, Routed, Router } from '../router/router.ts';
import { ended, eventUsage, replay, replayEvents, shapeUsage, type StreamKind } from './pipeline-streams.ts';
import { servedTarget, streamAnswer, withHeaders, withServed } from './answers.ts';
import { Coalescer, type Coalescing } from './coalescer.ts';
import type { ChunkPart, EventPart, StreamPart } from '../protocol/stream-part.ts';

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
  /** whether the cache is looked up (false: no-cache refreshes it) */
  read: boolean;
}

export class Pipeline {
  private readonly principals = new Map<string, Principal>();
  /** undefined without a cache: nothing has a cache key to share */
  private readonly coalescer: Coalescer | undefined;

  constructor(
    private readonly router: Router,
    private readonly s: PipelineServices,
  ) {
    this.coalescer = s.cache ? new Coalescer(s.flights, s.cache) : undefined;
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
    return { principal, targets, decision, key, read: decision?.use === true && decision.read };
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

  /** The admission of a request on its way upstream; a refusal lets go the claim its cache lookup took. */
  private async admitUpstream(job: Job, prep: Prep, s: PipelineServices, co: Coalescing | undefined): Promise<Admission | undefined> {
    // hot path: no closure or extra promise per request (a .catch() would make both)
    try {
      return await this.admit(job, prep, s, true);
    } catch (err) {
      co?.letGo();
      throw err;
    }
  }

  /** Served from the cache (admitted against rpm only), with the entry's age. */
  private hit(adm: Admission | undefined, cache: ResponseCache, entry: Entry): Served {
    cache.stats.hits++;
    return this.served(adm, 'hit', { age: String(cache.age(entry)) });
  }

  /** Without a cache key: the cache's bypass (nothing without a cache). */
  private bypass(s: PipelineServices): CacheStatus | undefined {
    if (!s.cache) return undefined;
    s.cache.stats.bypasses++;
    return 'bypass';
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
  private coalesced(adm: Admission | undefined): Served {
    adm?.settle('refund', undefined);
    return this.served(adm, 'hit', { age: '0', 'x-switchyard-coalesced': 'true' });
  }

  /**
   * A non-streaming answer. `usageOf` reads the answer's usage in the gateway's terms (default: its
   * Chat Completions `usage`; another protocol's answer names its tokens otherwise).
   */
  async once<T extends object>(job: Job, call: (signal: AbortLike) => Promise<Routed<T>>, usageOf: (answer: T) => UsageLike | null | undefined = chatUsage): Promise<Answer<T>> {
    const s = this.s;
    // the key's model list; the cache key
    const prep = this.prepare(job, false, s);
    const co = prep.key !== undefined ? this.coalescer?.begin(prep.key) : undefined;
    // cache: a stored answer is served as it is
    const entry = co && prep.read ? await co.lookup() : undefined;
    const hitTarget = entry?.kind === 'json' ? servedTarget(prep.targets, entry) : undefined;
    if (s.cache && entry?.kind === 'json' && hitTarget) {
      const adm = await this.admit(job, prep, s, false);
      return { result: entry.body as T, target: hitTarget, attempts: 0, upstreamMs: 0, served: this.hit(adm, s.cache, entry) };
    }
    // limits
    const adm = await this.admitUpstream(job, prep, s, co);
    try {
      if (!co) {
        // router, accounting
        const status = this.bypass(s);
        const r = await call(job.info.signal);
        adm?.settle(usageOf(r.result) ?? undefined, r.target.target.price);
        return withServed(r, this.served(adm, status));
      }
      // coalescing → router (a led answer is stored in the cache)
      const c = await co.once(job.info.signal, call, prep.targets);
      if (c.by !== 'lead') return withServed(c.routed, this.coalesced(adm));
      // accounting
      adm?.settle(usageOf(c.routed.result) ?? undefined, c.routed.target.target.price);
      return withServed(c.routed, this.served(adm, 'miss'));
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
   * A stream's way through the pipeline, for either kind of part. Its usage is read on the way
   * (`kind.read`) and accounted when the stream ends however it ends; the lease is held until the
   * client's stream ends.
   */
  private async flow<P extends StreamPart>(job: Job, open: (signal: AbortLike) => Promise<Routed<AsyncIterable<P>>>, kind: StreamKind<P>): Promise<StreamResult<P>> {
    const sink: { value: Usage | undefined } = { value: undefined };
    const s = this.s;
    // the key's model list; the cache key
    const prep = this.prepare(job, true, s);
    const signal = job.info.signal;
    const co = prep.key !== undefined ? this.coalescer?.begin(prep.key) : undefined;
    // cache: a stored stream is replayed
    const entry = co && prep.read ? await co.lookup() : undefined;
    const hitTarget = entry?.kind === 'stream' ? servedTarget(prep.targets, entry) : undefined;
    if (s.cache && entry?.kind === 'stream' && hitTarget) {
      const adm = await this.admit(job, prep, s, false);
      const served = this.hit(adm, s.cache, entry);
      return { result: kind.read(kind.replay(entry.chunks), sink), usage: sink, target: hitTarget, attempts: 0, upstreamMs: 0, served };
    }
    // limits
    const adm = await this.admitUpstream(job, prep, s, co);
    try {
      if (!co) {
        // router; accounting when the stream ends (without an admission there is nothing to settle)
        const status = this.bypass(s);
        const r = await open(signal);
        const price = r.target.target.price;
        const read = kind.read(r.result, sink);
        const result = adm
          ? ended(read, signal, () => {
              adm.settle(sink.value, price);
              adm.release();
            })
          : read;
        return streamAnswer(r, result, sink, this.served(adm, status));
      }
      // coalescing → router; a led stream is accounted (and cached) by the coalescer as its upstream
      // stream ends, whoever still reads it
      const c = await co.stream(signal, open, kind, adm, prep.targets);
      const served = c.by === 'lead' ? this.served(adm, 'miss') : this.coalesced(adm);
      const result = ended(kind.read(c.routed.result, sink), signal, () => {
        adm?.release();
        c.done();
      });
      return streamAnswer(c.routed, result, sink, served);
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
