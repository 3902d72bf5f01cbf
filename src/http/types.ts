import type { HttpBindings } from '@hono/node-server';
import type { Exchange } from './exchange.ts';

export interface RequestLog {
  route: string;
  model?: string;
  backend?: string;
  upstreamModel?: string;
  attempts?: number;
  errorCode?: string | null;
  promptTokens?: number;
  completionTokens?: number;
  stream?: boolean;
  key?: string;
  /** performance.now() when the request arrived */
  startedAt: number;
  /** streams: ms from arrival to the first chunk written */
  ttftMs?: number;
  /** ms spent in upstream calls */
  upstreamMs?: number;
  /** USD; undefined = unknown (no price or no usage) */
  costUsd?: number;
  /** the serving target had a price configured */
  priced?: boolean;
  price?: { input: number; output: number } | undefined;
  cache?: 'hit' | 'miss' | 'bypass';
}

export interface AppEnv {
  Bindings: HttpBindings;
  Variables: {
    /** the request's state, opened by the access log middleware */
    x: Exchange;
  };
}
