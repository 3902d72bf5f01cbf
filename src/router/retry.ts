/**
 * What to do after a failed attempt, and how long to wait before retrying the same target.
 * Pure: randomness is passed in.
 */
import { ERRORS, type Disposition } from '../errors/codes.ts';
import type { GatewayError } from '../errors/gateway-error.ts';

export interface RetryConfig {
  /** Extra attempts on the same target before moving on (0: fail over at once). */
  max_retries: number;
  base_delay_ms: number;
  max_delay_ms: number;
}

export type { Disposition } from '../errors/codes.ts';

/** What to do after an attempt failed with `e`: its code's row of the error table decides. */
export function disposition(e: GatewayError): Disposition {
  return e.disposition;
}

/** Whether an attempt that failed with `e` counts against its target's breaker and health stats. */
export function blamesTarget(e: GatewayError): boolean {
  return ERRORS[e.kind].breaker;
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
