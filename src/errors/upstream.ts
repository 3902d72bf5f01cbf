/**
 * Turns what an upstream said (status, error body, headers) or failed to say (timeouts, resets)
 * into a GatewayError classified by the error table (src/errors/codes.ts): client-facing status and
 * what the router does next.
 * Upstream messages are passed on for client-fault errors (they explain the problem), always with
 * secrets scrubbed.
 */
import { GatewayError, type ErrorCode } from './gateway-error.ts';

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
  /** `wireCode`: the upstream's own code, where it is passed on (undefined: the table's). */
  const make = (kind: ErrorCode, message: string, wireCode?: string | null): GatewayError => {
    return new GatewayError(kind, message, { wireCode, upstreamStatus: status, param, retryAfter, backend });
  };
  const said = upstreamMsg ? `: ${upstreamMsg}` : '';
  switch (true) {
    case status === 401 || status === 403:
      // The client's own key is fine (it passed our auth); the gateway's key for this upstream is not.
      return make('upstream_auth_failed', `Backend "${backend}" rejected the gateway's credentials (upstream status ${status}${said}).`);
    case status === 408:
      return make('upstream_timeout', `Backend "${backend}" timed out (upstream status 408).`);
    case status === 429:
      return make('upstream_rate_limited', upstreamMsg ?? `Backend "${backend}" is rate limiting requests.`, code ?? undefined);
    case status === 409:
      return make('upstream_conflict', upstreamMsg ?? `Backend "${backend}" reported a conflict.`, code);
    case status === 503 || status === 529:
      return make('upstream_unavailable', `Backend "${backend}" is overloaded or unavailable (upstream status ${status}${said}).`);
    case status === 504:
      return make('upstream_timeout', `Backend "${backend}" timed out (upstream status 504).`);
    case status >= 500:
      return make('upstream_error', `Backend "${backend}" failed (upstream status ${status}${said}).`);
    case status === 402:
      return make('upstream_payment_required', upstreamMsg ?? `Backend "${backend}" rejected the request (upstream status 402).`, code);
    case status === 404:
      return make('model_not_found', upstreamMsg ?? `Backend "${backend}" does not know this model or route.`, code ?? undefined);
    case status === 413:
      return make('request_too_large', upstreamMsg ?? `Backend "${backend}" says the request is too large.`, code ?? undefined);
    case status >= 400:
      return make('upstream_rejected', upstreamMsg ?? `Backend "${backend}" rejected the request (upstream status ${status}).`, code);
    default:
      return make('upstream_error', `Backend "${backend}" answered with unexpected status ${status}.`);
  }
}

export function upstreamTimeout(backend: string, ms: number, what = 'respond'): GatewayError {
  return new GatewayError('upstream_timeout', `Backend "${backend}" did not ${what} within ${ms} ms.`, { backend });
}

export function upstreamUnreachable(backend: string, detail: string): GatewayError {
  return new GatewayError('upstream_unreachable', `Could not reach backend "${backend}": ${detail}.`, { backend });
}

export function upstreamMalformed(backend: string, detail: string): GatewayError {
  return new GatewayError('upstream_malformed_response', `Backend "${backend}" sent a malformed response: ${detail}.`, { backend });
}

export function clientClosed(): GatewayError {
  return new GatewayError('client_closed_request');
}
