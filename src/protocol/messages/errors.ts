/**
 * Anthropic's error envelope for the `/v1/messages` routes: `{"type":"error","error":{"type","message"}}`
 * (plus `request_id` when known), its statuses, and the mid-stream `event: error` frame.
 *
 * The type is the `anthropic` column of the error table (src/errors/codes.ts), which follows
 * Anthropic's status → type rule: 400 invalid_request_error, 401 authentication_error,
 * 402 billing_error, 403 permission_error, 404 not_found_error, 413 request_too_large,
 * 429 rate_limit_error (budgets too: Anthropic reports spend limits as 429 rate_limit_error),
 * 500 api_error, 504 timeout_error, 529 overloaded_error; any other 4xx invalid_request_error,
 * any other 5xx api_error.
 *
 * The gateway's 503s (overload gate, every target unavailable, not ready, draining) are
 * `overloaded_error` and answered as **529**: that is what Anthropic sends for "temporarily unable, retry", the SDKs
 * raise it as `OverloadedError` and retry it, and Claude Code handles it as an overload. Every
 * other status is kept (502 stays 502 with `api_error`; the SDKs retry every 5xx alike), and
 * `retry-after` / `x-should-retry` come from errorHeaders() unchanged.
 */
import { ERRORS, type AnthropicErrorType } from '../../errors/codes.ts';
import { errorHeaders, type GatewayError } from '../../errors/gateway-error.ts';
import { sse } from './sse.ts';

export type { AnthropicErrorType } from '../../errors/codes.ts';

export interface AnthropicErrorBody {
  type: 'error';
  error: { type: AnthropicErrorType; message: string };
  request_id?: string;
}

/** The HTTP status an Anthropic client gets for `err`. */
export function anthropicStatus(err: GatewayError): number {
  return anthropicErrorType(err) === 'overloaded_error' ? 529 : err.status;
}

export function anthropicErrorType(err: GatewayError): AnthropicErrorType {
  return ERRORS[err.kind].anthropic;
}

export function toAnthropicError(err: GatewayError, requestId?: string): AnthropicErrorBody {
  const body: AnthropicErrorBody = { type: 'error', error: { type: anthropicErrorType(err), message: err.message } };
  if (requestId !== undefined) body.request_id = requestId;
  return body;
}

export interface AnthropicErrorResponse {
  status: number;
  /** retry-after, x-should-retry, x-switchyard-attempts, x-ratelimit-*: errorHeaders() of the error. */
  headers: Record<string, string>;
  body: AnthropicErrorBody;
}

/** Everything an HTTP writer needs to answer `err` on an Anthropic route (content-type is JSON). */
export function anthropicErrorResponse(err: GatewayError, requestId?: string): AnthropicErrorResponse {
  return { status: anthropicStatus(err), headers: errorHeaders(err), body: toAnthropicError(err, requestId) };
}

/** The `error` stream event that ends a stream after its commit point. */
export function errorEvent(err: GatewayError): { type: 'error'; error: { type: AnthropicErrorType; message: string } } {
  return { type: 'error', error: { type: anthropicErrorType(err), message: err.message } };
}

/** `event: error\ndata: {…}\n\n`, ready to write. */
export function errorFrame(err: GatewayError): string {
  return sse(errorEvent(err));
}
