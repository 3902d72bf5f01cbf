/**
 * The GatewayError family. Every failure the gateway reports, whatever its cause, becomes one of
 * these, and `toOpenAIError` is the only place that writes the OpenAI error envelope.
 */

export type OpenAIErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'upstream_error'
  | 'timeout_error'
  | 'service_unavailable_error'
  | 'server_error'
  | 'insufficient_quota';

export interface OpenAIErrorBody {
  error: { message: string; type: OpenAIErrorType; param: string | null; code: string | null };
}

export interface GatewayErrorOptions {
  status: number;
  type: OpenAIErrorType;
  code?: string | null;
  param?: string | null;
  /** true when another attempt (same or other target) may succeed. */
  retryable?: boolean;
  /** seconds, for `retry-after`. */
  retryAfter?: number | undefined;
  cause?: unknown;
  /** The backend that produced it. */
  backend?: string | undefined;
}

export class GatewayError extends Error {
  readonly status: number;
  readonly type: OpenAIErrorType;
  readonly code: string | null;
  readonly param: string | null;
  readonly retryable: boolean;
  readonly retryAfter: number | undefined;
  /** Set by the router once its own attempts are spent: clients should not retry blindly. */
  exhausted = false;
  /** Backend that produced this error, when one did. */
  backend: string | undefined;
  /** How many upstream attempts were made before giving up. */
  attempts: number | undefined;
  /** Extra response headers (x-ratelimit-* of the caller's key, retry-after-ms, …). */
  headers: Record<string, string> | undefined;

  constructor(message: string, opts: GatewayErrorOptions) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'GatewayError';
    this.status = opts.status;
    this.type = opts.type;
    this.code = opts.code ?? null;
    this.param = opts.param ?? null;
    this.retryable = opts.retryable ?? false;
    this.retryAfter = opts.retryAfter;
    this.backend = opts.backend;
  }
}

export const invalidRequest = (message: string, param: string | null = null, code: string | null = null): GatewayError =>
  new GatewayError(message, { status: 400, type: 'invalid_request_error', param, code });

export const modelNotFound = (model: string): GatewayError =>
  new GatewayError(`The model '${model}' does not exist or you do not have access to it.`, {
    status: 404,
    type: 'invalid_request_error',
    param: 'model',
    code: 'model_not_found',
  });

export const unauthorized = (message: string): GatewayError =>
  new GatewayError(message, { status: 401, type: 'authentication_error', code: 'invalid_api_key' });

export const payloadTooLarge = (limit: number): GatewayError =>
  new GatewayError(`Request body is larger than the limit of ${limit} bytes.`, {
    status: 413,
    type: 'invalid_request_error',
    code: 'request_too_large',
  });

export const routeNotFound = (method: string, path: string): GatewayError =>
  new GatewayError(`Unknown request URL: ${method} ${path}. Please check the URL for typos.`, {
    status: 404,
    type: 'invalid_request_error',
    code: 'unknown_url',
  });

export const methodNotAllowed = (method: string, path: string): GatewayError =>
  new GatewayError(`Method ${method} is not allowed on ${path}.`, {
    status: 405,
    type: 'invalid_request_error',
    code: 'method_not_allowed',
  });

export const unsupported = (message: string, param: string | null = null): GatewayError =>
  new GatewayError(message, { status: 400, type: 'invalid_request_error', param, code: 'unsupported' });

/** Anything that is not a GatewayError is an internal bug: report it without details. */
export function asGatewayError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  return new GatewayError('The gateway hit an internal error while handling the request.', {
    status: 500,
    type: 'server_error',
    code: 'internal_error',
    cause: err,
  });
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
