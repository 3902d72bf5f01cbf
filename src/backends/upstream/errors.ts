/**
 * Turns what an upstream said (status, error body, headers) or failed to say (timeouts, resets)
 * into a GatewayError with the right client-facing status and a `retryable` flag for the router.
 * Upstream messages are passed on for client-fault errors (they explain the problem), always with
 * secrets scrubbed.
 */
import { GatewayError, type OpenAIErrorType } from '../../errors/gateway-error.ts';

/** Replaces the backend's own key and anything shaped like a vendor key. */
export function redact(text: string, secrets: ReadonlyArray<string>): string {
  let out = text;
  for (const s of secrets) if (s.length >= 4) out = out.split(s).join('[redacted]');
  return out.replace(/\b(sk|pk|rk)-[A-Za-z0-9_*\-]{6,}/g, '[redacted]').replace(/\bBearer\s+[A-Za-z0-9._~+/=\-]{8,}/gi, 'Bearer [redacted]');
}

/** Seconds from `retry-after-ms` or `retry-after` (seconds or HTTP date). */
export function retryAfterSeconds(get: (name: string) => string | null | undefined, now = Date.now()): number | undefined {
  const ms = get('retry-after-ms');
  if (ms) {
    const n = Number(ms);
    if (Number.isFinite(n) && n >= 0) return n / 1000;
  }
  const ra = get('retry-after');
  if (!ra) return undefined;
  const n = Number(ra);
  if (Number.isFinite(n) && n >= 0) return n;
  const t = Date.parse(ra);
  return Number.isNaN(t) ? undefined : Math.max(0, (t - now) / 1000);
}

export interface UpstreamErrorInfo {
  backend: string;
  status: number;
  /** The vendor's error object (`body.error` for OpenAI-style APIs) or undefined. */
  error?: { message?: unknown; type?: unknown; param?: unknown; code?: unknown } | undefined;
  retryAfter?: number | undefined;
  secrets: ReadonlyArray<string>;
}

const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);

export function fromUpstreamStatus(info: UpstreamErrorInfo): GatewayError {
  const { backend, status, error, retryAfter, secrets } = info;
  const upstreamMsg = str(error?.message) ? redact(String(error?.message), secrets) : null;
  const code = str(error?.code);
  const param = str(error?.param);
  const make = (s: number, type: OpenAIErrorType, message: string, retryable: boolean, c: string | null = code): GatewayError => {
    return new GatewayError(message, { status: s, type, code: c, param, retryable, retryAfter, backend });
  };
  switch (true) {
    case status === 401 || status === 403:
      // The client's own key is fine (it passed our auth); the gateway's key for this upstream is not.
      return make(
        502,
        'upstream_error',
        `Backend "${backend}" rejected the gateway's credentials (upstream status ${status}${upstreamMsg ? `: ${upstreamMsg}` : ''}).`,
        true,
        'upstream_auth_failed',
      );
    case status === 408:
      return make(504, 'timeout_error', `Backend "${backend}" timed out (upstream status 408).`, true, 'upstream_timeout');
    case status === 429:
      return make(429, 'rate_limit_error', upstreamMsg ?? `Backend "${backend}" is rate limiting requests.`, true, code ?? 'rate_limit_exceeded');
    case status === 409:
      return make(409, 'invalid_request_error', upstreamMsg ?? `Backend "${backend}" reported a conflict.`, true);
    case status === 503 || status === 529:
      return make(503, 'service_unavailable_error', `Backend "${backend}" is overloaded or unavailable (upstream status ${status}${upstreamMsg ? `: ${upstreamMsg}` : ''}).`, true, 'upstream_unavailable');
    case status === 504:
      return make(504, 'timeout_error', `Backend "${backend}" timed out (upstream status 504).`, true, 'upstream_timeout');
    case status >= 500:
      return make(502, 'upstream_error', `Backend "${backend}" failed (upstream status ${status}${upstreamMsg ? `: ${upstreamMsg}` : ''}).`, true, 'upstream_error');
    case status === 404:
      return make(404, 'invalid_request_error', upstreamMsg ?? `Backend "${backend}" does not know this model or route.`, false, code ?? 'model_not_found');
    case status === 413:
      return make(413, 'invalid_request_error', upstreamMsg ?? `Backend "${backend}" says the request is too large.`, false, code ?? 'request_too_large');
    case status >= 400:
      return make(status, 'invalid_request_error', upstreamMsg ?? `Backend "${backend}" rejected the request (upstream status ${status}).`, false);
    default:
      return make(502, 'upstream_error', `Backend "${backend}" answered with unexpected status ${status}.`, true, 'upstream_error');
  }
}

export function upstreamTimeout(backend: string, ms: number, what = 'respond'): GatewayError {
  return new GatewayError(`Backend "${backend}" did not ${what} within ${ms} ms.`, {
    status: 504,
    type: 'timeout_error',
    code: 'upstream_timeout',
    retryable: true,
    backend,
  });
}

export function upstreamUnreachable(backend: string, detail: string): GatewayError {
  return new GatewayError(`Could not reach backend "${backend}": ${detail}.`, {
    status: 502,
    type: 'upstream_error',
    code: 'upstream_unreachable',
    retryable: true,
    backend,
  });
}

export function upstreamMalformed(backend: string, detail: string): GatewayError {
  return new GatewayError(`Backend "${backend}" sent a malformed response: ${detail}.`, {
    status: 502,
    type: 'upstream_error',
    code: 'upstream_malformed_response',
    retryable: true,
    backend,
  });
}

export function clientClosed(): GatewayError {
  return new GatewayError('The client closed the request before it completed.', {
    status: 499,
    type: 'invalid_request_error',
    code: 'client_closed_request',
  });
}
