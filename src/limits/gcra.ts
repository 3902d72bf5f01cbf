/**
 * GCRA (the generic cell rate algorithm): a rate limit of `limit` units per `windowMs` kept as one
 * number per key, the theoretical arrival time (TAT). The whole window's allowance is available as
 * a burst and refills continuously at limit/window — there is no window boundary, so no double
 * burst at one. Pure functions of (state, now): the in-memory store calls them directly and
 * `state/store/redis-scripts.ts` does the same arithmetic in Lua.
 */

export interface GcraResult {
  allowed: boolean;
  /** TAT to store (unchanged when refused). */
  tat: number;
  /** Units still available right now (after this cost when allowed). */
  remaining: number;
  /** ms until the allowance is full again. */
  resetMs: number;
  /** ms until this cost could pass; Infinity when it is larger than the whole allowance. */
  retryAfterMs: number;
}

/** Float slack so that exact multiples do not fail on rounding. */
const EPS = 1e-6;

export function gcra(tat: number, now: number, cost: number, limit: number, windowMs: number): GcraResult {
  const interval = windowMs / limit;
  const base = Math.max(tat, now);
  const level = base - now;
  const after = level + cost * interval;
  if (after > windowMs + EPS) {
    return {
      allowed: false,
      tat,
      remaining: Math.max(0, Math.floor((windowMs - level) / interval + EPS)),
      resetMs: level,
      retryAfterMs: cost * interval > windowMs + EPS ? Number.POSITIVE_INFINITY : after - windowMs,
    };
  }
  return {
    allowed: true,
    tat: base + cost * interval,
    remaining: Math.max(0, Math.floor((windowMs - after) / interval + EPS)),
    resetMs: after,
    retryAfterMs: 0,
  };
}

/**
 * Moves a TAT by `delta` units: positive to charge more than was reserved, negative to refund.
 * A refund never takes the allowance above full (TAT never goes below now).
 */
export function gcraAdjust(tat: number, now: number, delta: number, limit: number, windowMs: number): number {
  const next = Math.max(tat, now) + delta * (windowMs / limit);
  return Math.max(next, now);
}
