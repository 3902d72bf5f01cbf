/** Types the upstream client's modules share (client, calls, SSE reader, status errors). */
import type { EventSourceMessage } from 'eventsource-parser';
import type { Dispatcher } from 'undici';
import type { GatewayError } from '../../errors/gateway-error.ts';
import type { CallTrace, UpstreamAbort } from '../contract.ts';
import type { UpstreamErrorInfo } from '../../errors/upstream.ts';

/** What a non-2xx answer said. */
export interface StatusErrorInfo extends UpstreamErrorInfo {
  /** The body as text when it was not JSON (capped), else undefined. */
  bodyText: string | undefined;
}

/**
 * Error framings beyond `data: {"error":…}`. Each hook returns the `data:` payload to handle in
 * place of what it was given (an error payload is one with an "error" key), or null to drop it.
 */
export interface SseFraming {
  /** An event; `ev.event` is its `event:` name, if any. */
  event?(ev: EventSourceMessage): string | null;
  /** A line whose field is not an SSE field (`error: {…}`): handled as an event of its own. */
  unknownField?(field: string, value: string): string | null;
}

export interface UpstreamClientOptions {
  backend: string;
  /** e.g. https://api.openai.com/v1 (paths are appended to it) */
  baseUrl: string;
  dispatcher: Dispatcher;
  /** sent on every request; names are lower-cased */
  headers: Record<string, string>;
  secrets: ReadonlyArray<string>;
  maxResponseBytes: number;
  /** A non-2xx answer → the error to throw (default: fromUpstreamStatus). */
  statusError?: ((info: StatusErrorInfo) => GatewayError) | undefined;
  /** The `error` value of a `data: {"error":…}` event → the error to throw. */
  streamError?: ((error: unknown) => GatewayError) | undefined;
  sseFraming?: SseFraming | undefined;
}

/** An AbortSignal, or the router attempt's cheaper EventEmitter abort (undici takes either). */
export type CallSignal = AbortSignal | UpstreamAbort;

export interface CallOptions {
  signal: CallSignal;
  headers?: Record<string, string> | undefined;
  /** the attempt's trace (CallContext's): its `traceparent` goes upstream, its span learns the call */
  trace?: CallTrace | undefined;
}
