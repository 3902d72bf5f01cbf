/**
 * Every error the gateway reports, as one table: its classification (`ErrorCode`), the HTTP status
 * and OpenAI `type` a client gets, the Anthropic `type` on the `/v1/messages` routes, what the
 * router does after an attempt fails with it, and whether it counts against the target's breaker.
 *
 * The table code is the gateway's classification. The `code` field on the wire defaults to it (or
 * to `wire` below); an upstream's own code may replace it where the upstream's is the more
 * informative one (`context_length_exceeded` on a 400, a vendor's 429 code).
 *
 * docs/api.md lists every row of this table (src/errors/codes.test.ts checks it).
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

export type AnthropicErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'billing_error'
  | 'permission_error'
  | 'not_found_error'
  | 'request_too_large'
  | 'rate_limit_error'
  | 'api_error'
  | 'timeout_error'
  | 'overloaded_error';

/**
 * What the router does after an attempt failed with this error.
 * - `fatal`: the request itself is at fault (400, 404, 413, 422…), the client left, or the error is
 *   the gateway's own and no target would answer differently: stop.
 * - `retry`: a transient upstream condition (429, 409, 5xx, 529, connection refused or reset, an
 *   error event mid-stream): retry the same target after a backoff, then fail over.
 * - `failover`: the target will not get better within this request (its key is rejected, it is
 *   unconfigured or not ready, it timed out, it answered garbage, it lacks a feature the request
 *   needs): go straight to the next target.
 */
export type Disposition = 'fatal' | 'retry' | 'failover';

export interface ErrorSpec {
  /** HTTP status; `upstream`: the upstream's own 4xx status, passed on. */
  readonly status: number | 'upstream';
  readonly type: OpenAIErrorType;
  readonly anthropic: AnthropicErrorType;
  readonly disposition: Disposition;
  /** Counts as a failure of the target for its circuit breaker and health stats. */
  readonly breaker: boolean;
  /** The `code` a client sees when it is not the table code (null: none). */
  readonly wire?: string | null;
  /** The message when the caller gives none. */
  readonly message?: string;
}

const request = { type: 'invalid_request_error', anthropic: 'invalid_request_error', disposition: 'fatal', breaker: false } as const;
const unavailable = { status: 503, type: 'service_unavailable_error', anthropic: 'overloaded_error' } as const;
const upstream = { status: 502, type: 'upstream_error', anthropic: 'api_error', breaker: true } as const;

export const ERRORS = {
  // The request's fault, found by the gateway.
  invalid_request: { ...request, status: 400, wire: null },
  unsupported_parameter: { ...request, status: 400 },
  unsupported_value: { ...request, status: 400 },
  unsupported: { ...request, status: 400 },
  context_length_exceeded: { ...request, status: 400 },
  model_not_supported: { ...request, status: 400 },
  invalid_pin: { ...request, status: 400 },
  // what Node's HTTP parser refuses before a request exists (the OpenAI envelope: no route is known)
  bad_request: { ...request, status: 400, message: 'The request could not be parsed as HTTP/1.1.' },
  headers_too_large: { ...request, status: 431, message: 'Request headers are too large.' },
  request_timeout: { ...request, status: 408, message: 'The request was not received in time.' },
  invalid_api_key: { ...request, status: 401, type: 'authentication_error', anthropic: 'authentication_error' },
  admin_disabled: {
    ...request,
    status: 403,
    type: 'permission_error',
    anthropic: 'permission_error',
    message: 'The admin surface is disabled: set admin.key in providers.yaml to use it.',
  },
  model_not_found: { ...request, status: 404, anthropic: 'not_found_error' },
  item_not_found: { ...request, status: 404, anthropic: 'not_found_error', wire: null },
  unknown_url: { ...request, status: 404, anthropic: 'not_found_error' },
  method_not_allowed: { ...request, status: 405 },
  request_too_large: { ...request, status: 413, anthropic: 'request_too_large' },
  client_closed_request: { ...request, status: 499, message: 'The client closed the request before it completed.' },

  // The gateway's own limits and state.
  rate_limit_exceeded: { ...request, status: 429, type: 'rate_limit_error', anthropic: 'rate_limit_error' },
  budget_exceeded: { ...request, status: 429, type: 'insufficient_quota', anthropic: 'rate_limit_error' },
  server_overloaded: { ...unavailable, disposition: 'fatal', breaker: false },
  state_unavailable: { ...unavailable, disposition: 'fatal', breaker: false },
  not_ready: { ...unavailable, disposition: 'fatal', breaker: false },
  draining: { ...unavailable, disposition: 'fatal', breaker: false, message: 'The gateway is shutting down.' },
  deadline_exceeded: { status: 504, type: 'timeout_error', anthropic: 'timeout_error', disposition: 'fatal', breaker: false },
  internal_error: {
    status: 500,
    type: 'server_error',
    anthropic: 'api_error',
    disposition: 'fatal',
    breaker: false,
    message: 'The gateway hit an internal error while handling the request.',
  },

  // A target that cannot serve now.
  backend_not_configured: { ...unavailable, disposition: 'failover', breaker: true },
  backend_not_ready: { ...unavailable, disposition: 'failover', breaker: true },
  backend_unsupported: { ...request, status: 400, disposition: 'failover', breaker: true, wire: 'unsupported' },
  circuit_open: { ...unavailable, disposition: 'failover', breaker: true },

  // What an upstream said, or failed to say.
  upstream_rejected: { ...request, status: 'upstream', wire: null },
  upstream_payment_required: { ...request, status: 402, anthropic: 'billing_error', wire: null },
  upstream_conflict: { ...request, status: 409, disposition: 'retry', breaker: true, wire: null },
  upstream_rate_limited: { status: 429, type: 'rate_limit_error', anthropic: 'rate_limit_error', disposition: 'retry', breaker: true, wire: 'rate_limit_exceeded' },
  upstream_auth_failed: { ...upstream, disposition: 'failover' },
  upstream_error: { ...upstream, disposition: 'retry' },
  upstream_unavailable: { ...unavailable, disposition: 'retry', breaker: true },
  upstream_timeout: { status: 504, type: 'timeout_error', anthropic: 'timeout_error', disposition: 'failover', breaker: true },
  upstream_unreachable: { ...upstream, disposition: 'retry' },
  upstream_malformed_response: { ...upstream, disposition: 'failover' },
  upstream_response_too_large: { ...upstream, disposition: 'failover' },
  upstream_stream_error: { ...upstream, disposition: 'retry' },
  upstream_connection_lost: { ...upstream, disposition: 'retry' },
  upstream_stream_truncated: { ...upstream, disposition: 'failover' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

/** The row of `code`, widened to ErrorSpec (the literal types are for the `ErrorCode` union only). */
export function errorSpec(code: ErrorCode): ErrorSpec {
  return ERRORS[code];
}

export const ERROR_CODES = Object.keys(ERRORS) as ErrorCode[];

/** For a `switch` over a union: the compiler proves every member is handled. */
export function assertNever(x: never): never {
  throw new Error(`unhandled case: ${String(x)}`);
}
