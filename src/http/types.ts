import type { HttpBindings } from '@hono/node-server';
import type { ClientAbort } from '../abort.ts';

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
    requestId: string;
    keyName: string | undefined;
    log: RequestLog;
    /** counts the request in the in-flight gauge (called once its route is known) */
    trackInFlight: () => void;
    /** headers for the answer, collected as the route learns them (written by direct.ts) */
    out: Record<string, string>;
    /** fired when the client goes away before its answer is complete (unset without a Node server) */
    clientAbort: ClientAbort | undefined;
    /** size of the request body as received */
    bodyBytes: number | undefined;
  };
}
