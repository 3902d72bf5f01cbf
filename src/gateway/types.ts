/** Types the gateway's modules share. */
import type { Config } from '../config/schema.ts';
import type { Flights } from '../cache/flights.ts';
import type { ResponseCache } from '../cache/response-cache.ts';
import type { AbortLike } from '../lib/abort.ts';
import type { Limiter } from '../limits/limiter.ts';
import type { TokenCounter } from '../limits/tokens.ts';
import type { Operation, Routed } from '../router/router.ts';

/** Token usage as the gateway accounts it (the Chat Completions names). */
export type Usage = { prompt_tokens: number; completion_tokens: number; total_tokens: number };

/** What the pipeline needs of a stream chunk: its usage and whether it has choices. */
export type Chunk = { usage?: Usage | null | undefined; choices: unknown[] };

export type CacheStatus = 'hit' | 'miss' | 'bypass';

/** Response headers and cache outcome of an answer (x-ratelimit-*, x-switchyard-cache, age). */
export interface Served {
  headers: Record<string, string>;
  cache?: CacheStatus | undefined;
}

export type Answer<T> = Routed<T> & { served?: Served | undefined };

export interface StreamResult<T> extends Answer<AsyncIterable<T>> {
  /** Filled in when the upstream reported usage (read it after the stream ends). */
  usage: { value: Usage | undefined };
}

export interface CacheControl {
  noCache: boolean;
  noStore: boolean;
}

/** Per-request facts the pipeline needs from the HTTP layer. */
export interface JobInfo {
  signal: AbortLike;
  keyName?: string | undefined;
  pinBackend?: string | undefined;
  cacheControl?: CacheControl | undefined;
  bodyBytes: number;
}

export interface Job {
  op: Operation;
  body: Record<string, unknown> & { model: string; temperature?: number | null | undefined };
  info: JobInfo;
  /** the prompt, for the token reservation */
  prompt: { texts: string[]; fixed: number };
  /** output tokens to reserve */
  reserve: number;
  /** the prompt's token count once asked for (Pipeline.promptTokens): counted at most once per request */
  promptCount?: Promise<number> | undefined;
}

export interface PipelineServices {
  config: Config;
  limiter: Limiter;
  /** undefined: cache disabled */
  cache: ResponseCache | undefined;
  flights: Flights;
  tokens: TokenCounter;
}
