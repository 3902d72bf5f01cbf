/**
 * Builds what the request pipeline needs besides the router: the StateStore (memory or Redis),
 * the limiter, the response cache, the coalescing table, the tokenizer and the stored responses.
 */
import type { Config } from '../config/schema.ts';
import { Flights } from '../cache/flights.ts';
import { ResponseCache } from '../cache/response-cache.ts';
import { Limiter } from '../limits/limiter.ts';
import { encodingFor, TokenCounter, type Encoding } from '../limits/tokens.ts';
import type { PipelineServices } from '../gateway/pipeline.ts';
import { ResponsesStore } from '../gateway/responses-store.ts';
import { MemoryStore } from '../state/store/memory.ts';
import { RedisStore } from '../state/store/redis.ts';
import type { LimitName, StateStore } from '../state/store/contract.ts';
import type { Logger } from '../telemetry/logger.ts';

export interface BuiltServices extends PipelineServices {
  store: StateStore;
  tokens: TokenCounter;
  /** Stored responses of the Responses API, in `store` (built per generation; the entries live in the store). */
  responses: ResponsesStore;
  /** Start-up work (tokenizer encoders, the first Redis connection); /ready waits for it. */
  warm(): Promise<void>;
  /** Releases what these services own, except what a newer generation `keep`s. */
  close(keep?: ReusableServices): Promise<void>;
}

/**
 * The store the config names. `memory` is this process's own, or in a cluster worker the store
 * `sharedMemory` makes (the primary's, reached over IPC: state/store/ipc.ts).
 */
export function createStore(config: Config, logger: Logger, sharedMemory?: () => StateStore): StateStore {
  const st = config.state;
  if (st.store === 'redis') {
    return new RedisStore({
      url: st.url,
      keyPrefix: st.key_prefix,
      onUnavailable: st.on_unavailable,
      commandTimeoutMs: st.command_timeout_ms,
      maxEntries: config.cache.max_entries,
      maxBytes: config.cache.max_bytes,
      logger,
    });
  }
  if (sharedMemory !== undefined) return sharedMemory();
  return new MemoryStore({ maxEntries: config.cache.max_entries, maxBytes: config.cache.max_bytes, maxBlobBytes: config.responses.max_stored_bytes });
}

/** The encodings the configured models need, when some key has a tpm limit (else none). */
function neededEncodings(config: Config): Encoding[] {
  if (!config.keys?.some((k) => k.limits?.tpm !== undefined)) return [];
  const out = new Set<Encoding>();
  for (const m of Object.values(config.models)) {
    const first = m.targets[0];
    if (first) out.add(encodingFor(first.model));
  }
  return [...out];
}

/** What a configuration reload can carry over from the previous generation's services. */
export interface ReusableServices {
  store: StateStore;
  tokens: TokenCounter;
}

/** The part of the config that decides how the store is built: equal → the store can be kept. */
export function storeIdentity(config: Config): string {
  return JSON.stringify([config.state, config.cache.max_entries, config.cache.max_bytes]);
}

/**
 * The services over `store` (createStore's, or the previous generation's when its settings did not
 * change); `tokens` is the previous generation's tokenizer to keep, if any.
 */
export function createServices(
  config: Config,
  logger: Logger,
  store: StateStore,
  onRefused?: (key: string, limit: LimitName) => void,
  tokens: TokenCounter = new TokenCounter(),
): BuiltServices {
  let warned = false;
  const limiter = new Limiter(store, Date.now, onRefused, (err) => {
    if (warned) return;
    warned = true;
    logger.warn('limits: a state update failed', { error: err instanceof Error ? err.message.slice(0, 200) : 'unknown' });
  });
  const cache = config.cache.enabled ? new ResponseCache(store, config.cache) : undefined;
  // a kept store takes this generation's bound (a smaller one evicts at once)
  const responses = new ResponsesStore(store, {
    ttlSeconds: config.responses.store_ttl_seconds,
    maxEntryBytes: config.responses.max_response_bytes,
    maxTotalBytes: config.responses.max_stored_bytes,
  });
  return {
    config,
    store,
    limiter,
    cache,
    // across processes only when the store is shared by several (Redis, workers' IPC store)
    flights: new Flights(config.cache.coalesce, config.cache.coalesce && cache ? store.flights : undefined),
    tokens,
    responses,
    async warm() {
      const encodings = neededEncodings(config);
      await Promise.all([
        tokens.warm(encodings).catch((err: unknown) =>
          logger.error('tokenizer failed to load: token limits fall back to body bytes / 4', { error: err instanceof Error ? err.message : 'unknown' }),
        ),
        store instanceof RedisStore ? store.ready(3000) : Promise.resolve(true),
      ]);
    },
    async close(keep?: ReusableServices) {
      limiter.close();
      await Promise.all([keep?.tokens === tokens ? undefined : tokens.close(), keep?.store === store ? undefined : store.close()]);
    },
  };
}
