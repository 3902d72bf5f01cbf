/**
 * The GatewayError family. Every failure the gateway reports, whatever its cause, becomes one of
 * these, classified by a code of the table in codes.ts (status, type, router disposition), and
 * `toOpenAIError` is the only place that writes the OpenAI error envelope.
 */
import { ERRORS, type Disposition, type ErrorCode, type ErrorSpec, type OpenAIErrorType } from './codes.ts';

export type { Disposition, ErrorCode, OpenAIErrorType } from './codes.ts';

export interface OpenAIErrorBody {
  error: { message: string; type: OpenAIErrorType; param: string | null; code: string | null };
}

export interface GatewayErrorOptions {
  param?: string | null;
  /**
   * The `code` the client sees instead of the table's: an upstream's own, more informative code
   * (`context_length_exceeded`), or null for none.
   */
  wireCode?: string | null | undefined;
  /** The upstream's status, for codes whose table status is `upstream` (ignored otherwise). */
  upstreamStatus?: number | undefined;
  /** seconds, for `retry-after`. */
  retryAfter?: number | undefined;
  cause?: unknown;
  /** The backend that produced it. */
  backend?: string | undefined;
}

export class GatewayError extends Error {
  /** The gateway's classification: decides status, type and what the router does. */
  readonly kind: ErrorCode;
  readonly status: number;
  readonly type: OpenAIErrorType;
  /** The `code` on the wire. */
  readonly code: string | null;
  readonly param: string | null;
  readonly retryAfter: number | undefined;
  /** Set by the router once its own attempts are spent: clients should not retry blindly. */
  exhausted = false;
  /** Backend that produced this error, when one did. */
  backend: string | undefined;
  /** How many upstream attempts were made before giving up. */
  attempts: number | undefined;
  /** Extra response headers (x-ratelimit-* of the caller's key, retry-after-ms, …). */
  headers: Record<string, string> | undefined;

  constructor(kind: ErrorCode, message?: string, opts: GatewayErrorOptions = {}) {
    const spec: ErrorSpec = ERRORS[kind];
    super(message ?? spec.message ?? kind, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'GatewayError';
    this.kind = kind;
    this.status = spec.status === 'upstream' ? (opts.upstreamStatus ?? 400) : spec.status;
    this.type = spec.type;
    this.code = opts.wireCode !== undefined ? opts.wireCode : spec.wire !== undefined ? spec.wire : kind;
    this.param = opts.param ?? null;
    this.retryAfter = opts.retryAfter;
    this.backend = opts.backend;
  }

  /** What the router does after an attempt failed with this error. */
  get disposition(): Disposition {
    return ERRORS[this.kind].disposition;
  }

  /** true when another attempt (same or other target) may succeed. */
  get retryable(): boolean {
    return ERRORS[this.kind].disposition !== 'fatal';
  }
}

export const invalidRequest = (message: string, param: string | null = null, code: string | null = null): GatewayError =>
  new GatewayError('invalid_request', message, { param, wireCode: code });

export const modelNotFound = (model: string): GatewayError =>
  new GatewayError('model_not_found', `The model '${model}' does not exist or you do not have access to it.`, { param: 'model' });

export const unauthorized = (message: string): GatewayError => new GatewayError('invalid_api_key', message);

export const payloadTooLarge = (limit: number): GatewayError =>
  new GatewayError('request_too_large', `Request body is larger than the limit of ${limit} bytes.`);

export const routeNotFound = (method: string, path: string): GatewayError =>
  new GatewayError('unknown_url', `Unknown request URL: ${method} ${path}. Please check the URL for typos.`);

export const methodNotAllowed = (method: string, path: string): GatewayError =>
  new GatewayError('method_not_allowed', `Method ${method} is not allowed on ${path}.`);

export const unsupported = (message: string, param: string | null = null): GatewayError => new GatewayError('unsupported', message, { param });

/** Anything that is not a GatewayError is an internal bug: report it without details. */
export function asGatewayError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  return new GatewayError('internal_error', undefined, { cause: err });
}

export function toOpenAIError(err: GatewayError): OpenAIErrorBody {
  return { error: { message: err.message, type: err.type, param: err.param, code: err.code } };
}

/** Headers that belong with an error response. */
export function errorHeaders(err: GatewayError): Record<string, string> {
  const h: Record<string, string> = {};
  if (err.retryAfter !== undefined && (err.status === 429 || err.status === 503 || err.status === 502 || err.status === 504)) {
    h['retry-after'] = String(Math.max(0, Math.ceil(err.retryAfter)));
  } else if (err.status === 429 || err.status === 503) {
    h['retry-after'] = '1';
  }
  if (err.exhausted) h['x-should-retry'] = 'false';
  if (err.attempts !== undefined) h['x-switchyard-attempts'] = String(err.attempts);
  if (err.headers) Object.assign(h, err.headers);
  return h;
}
