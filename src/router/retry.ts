/**
 * What to do after a failed attempt, and how long to wait before retrying the same target.
 * Pure: randomness is passed in.
 */
import type { GatewayError } from '../errors/gateway-error.ts';

export interface RetryConfig {
  /** Extra attempts on the same target before moving on (0: fail over at once). */
  max_retries: number;
  base_delay_ms: number;
  max_delay_ms: number;
}

/**
 * - `fatal`: the request itself is at fault (400, 404, 413, 422…) or the client left: stop.
 * - `retry`: a transient upstream condition (429, 409, 5xx, 529, connection refused or reset, an
 *   error event mid-stream): retry the same target after a backoff, then fail over.
 * - `failover`: the target will not get better within this request (its key is rejected, it is
 *   unconfigured, it timed out, it answered garbage): go straight to the next target.
 */
export type Disposition = 'fatal' | 'retry' | 'failover';

const FAILOVER_CODES = new Set([
  'upstream_auth_failed',
  'backend_not_configured',
  'upstream_timeout',
  'upstream_malformed_response',
  'upstream_stream_truncated',
  'circuit_open',
  'upstream_response_too_large',
  // a local server still loading its model, or started without what this request needs
  'backend_not_ready',
  'unsupported',
]);

/**
 * A backend's refusal of the request as sent (a translating backend that cannot express a
 * parameter): the client gets it even when another target could serve, and the target is not to
 * blame, whatever `retryable` says.
 */
const REQUEST_FAULT_CODES = new Set(['unsupported_parameter', 'unsupported_value']);

export function disposition(e: GatewayError): Disposition {
  if (!e.retryable || e.status === 499) return 'fatal';
  if (e.code !== null && REQUEST_FAULT_CODES.has(e.code)) return 'fatal';
  if (e.code !== null && FAILOVER_CODES.has(e.code)) return 'failover';
  return 'retry';
}

/**
 * Delay before retry number `retry` (1-based) of the same target: the upstream's `retry-after`
 * when it gave one, else exponential backoff with "equal jitter" (half fixed, half random).
 */
export function backoffMs(retry: number, cfg: RetryConfig, rand: () => number, retryAfterSeconds?: number): number {
  if (retryAfterSeconds !== undefined && Number.isFinite(retryAfterSeconds)) return Math.max(0, Math.ceil(retryAfterSeconds * 1000));
  const exp = Math.min(cfg.max_delay_ms, cfg.base_delay_ms * 2 ** Math.max(0, retry - 1));
  return Math.round(exp / 2 + (rand() * exp) / 2);
}
