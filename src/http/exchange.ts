/**
 * One request's state from its arrival to its last byte: the Node request and response, the id,
 * the log record, the headers its answer collects, the client's abort, the route's params and
 * error envelope. The listener (http/listener.ts) opens it for every request; route handlers see
 * only this.
 */
import { randomHex } from '../lib/random-id.ts';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { ClientAbort } from '../lib/abort.ts';
import type { RequestTrace } from '../telemetry/tracing.ts';

/** The request's JSON log line, filled in as the request goes. */
export interface RequestLog {
  route: string;
  model?: string;
  backend?: string;
  upstreamModel?: string;
  attempts?: number;
  errorCode?: string | null;
  promptTokens?: number;
  completionTokens?: number;
  /** of promptTokens, those read from the provider's prompt cache */
  cachedTokens?: number | undefined;
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
  /** what a translation dropped (short notes, no prompt text) */
  warnings?: string[];
}

/** The error body a route answers with: OpenAI's, or Anthropic's on the `/v1/messages` routes. */
export type Envelope = 'openai' | 'anthropic';

/** A route's path params, decoded (http/route-table.ts). */
export type Params = Readonly<Record<string, string>>;

const NO_PARAMS: Params = Object.freeze({});

const REQUEST_ID = /^[A-Za-z0-9._:@\-]{1,128}$/;

/** `req_` and 32 random hex digits. */
function newRequestId(): string {
  return `req_${randomHex(16)}`;
}

export class Exchange {
  readonly startedAt = performance.now();
  /** the client's `x-request-id` when it is a sane one, else a new id */
  readonly requestId: string;
  readonly log: RequestLog;
  /** headers for the answer, collected as the route learns them (written by direct.ts and sse.ts) */
  readonly out: Record<string, string> = {};
  /** fired when the client goes away before its answer is complete */
  readonly abort = new ClientAbort();
  /** the client key's name, once auth.ts checked it */
  keyName: string | undefined;
  /** size of the request body as received */
  bodyBytes = 0;
  /** the connection must close after the answer: the body was refused, or is not waited for (body.ts) */
  closeAfter = false;
  /** what becomes of a body the answer does not wait for is settled (body.ts) */
  bodySettled = false;
  /** counted in the in-flight gauge (access-log.ts) */
  inFlight = false;
  /** the params the route's pattern bound (`{id}` of `/v1/responses/{id}`) */
  params: Params = NO_PARAMS;
  /** the envelope errors of this request are answered in (api.ts) */
  envelope: Envelope = 'openai';
  /** the request's trace while tracing is on (telemetry/tracing.ts): the route request carries it on, its ids go into its log lines */
  trace: RequestTrace | undefined = undefined;

  constructor(
    readonly incoming: IncomingMessage,
    readonly outgoing: ServerResponse,
  ) {
    const given = this.header('x-request-id');
    this.requestId = given !== undefined && REQUEST_ID.test(given) ? given : newRequestId();
    this.log = { route: 'unmatched', startedAt: this.startedAt };
  }

  /** The query string's parameters (`?beta=true`); the route itself is found without them. */
  query(): URLSearchParams {
    const url = this.incoming.url ?? '';
    const q = url.indexOf('?');
    return new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
  }

  /** A request header (lower-case name); repeated ones as Node joins them. */
  header(name: string): string | undefined {
    const v = this.incoming.headers[name];
    return typeof v === 'string' ? v : v?.join(', ');
  }
}
