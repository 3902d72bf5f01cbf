/**
 * Routing policies: each turns a model's targets into an attempt order. Pure functions of their
 * input (randomness and time are passed in). Whatever the policy, the targets after the first form
 * the fallback chain; open breakers are skipped later by the router, not here.
 *
 * - fallback: configuration order.
 * - weighted: the first target is drawn at random by `weight` (sticky per key when asked: the same
 *   key always draws the same target while the weights stay the same); the rest follow in
 *   configuration order. Weight 0 drains a target: it gets no traffic at all.
 * - cost: cheapest estimated request first (prompt tokens × input price + max output tokens ×
 *   output price); a target without `price` counts as most expensive. Ties go to the healthier
 *   target (lower recent failure rate), then configuration order.
 * - latency: lowest decaying-average latency first (time to first token for streams, total latency
 *   otherwise). A target with no recent observation counts as fastest so it gets measured, and with
 *   probability `exploreRate` a random other target goes first, so a recovered target is noticed.
 */
import type { LatencyEstimate } from './stats.ts';

export const POLICY_NAMES = ['fallback', 'weighted', 'cost', 'latency'] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];

export interface PolicyCandidate {
  weight: number;
  /** USD per 1M tokens */
  price: { input: number; output: number } | undefined;
  /** 0–1, recent failure share (breaker window) */
  failureRate: number;
  latency: LatencyEstimate;
}

export interface PolicyInput {
  promptTokens: number;
  maxOutputTokens: number;
  stream: boolean;
  /** uniform in [0, 1) */
  rand: () => number;
  /** set for sticky weighted routing: a stable identity such as the API key's name */
  stickyKey: string | undefined;
  exploreRate: number;
  now: number;
  /** an estimate older than this counts as unknown */
  staleMs: number;
}

/** FNV-1a → [0, 1): a stable "random" number per sticky key. */
export function stableUnit(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) / 2 ** 32;
}

export function estimateCost(c: PolicyCandidate, promptTokens: number, maxOutputTokens: number): number {
  if (!c.price) return Number.POSITIVE_INFINITY;
  return (promptTokens * c.price.input + maxOutputTokens * c.price.output) / 1e6;
}

function weighted(cands: readonly PolicyCandidate[], input: PolicyInput): number[] {
  const live = cands.map((c, i) => ({ c, i })).filter(({ c }) => c.weight > 0);
  const total = live.reduce((s, { c }) => s + c.weight, 0);
  if (live.length === 0 || total <= 0) return [];
  const r = (input.stickyKey !== undefined ? stableUnit(input.stickyKey) : input.rand()) * total;
  let acc = 0;
  let first = live[live.length - 1]?.i ?? 0;
  for (const { c, i } of live) {
    acc += c.weight;
    if (r < acc) {
      first = i;
      break;
    }
  }
  return [first, ...live.map(({ i }) => i).filter((i) => i !== first)];
}

function byCost(cands: readonly PolicyCandidate[], input: PolicyInput): number[] {
  const costs = cands.map((c) => estimateCost(c, input.promptTokens, input.maxOutputTokens));
  return cands
    .map((_, i) => i)
    .sort((a, b) => {
      const ca = costs[a] as number;
      const cb = costs[b] as number;
      const tie = ca === cb || (Number.isFinite(ca) && Number.isFinite(cb) && Math.abs(ca - cb) <= 1e-12 * Math.max(Math.abs(ca), Math.abs(cb)));
      if (!tie) return ca < cb ? -1 : 1;
      return (cands[a] as PolicyCandidate).failureRate - (cands[b] as PolicyCandidate).failureRate || a - b;
    });
}

function byLatency(cands: readonly PolicyCandidate[], input: PolicyInput): number[] {
  const score = (c: PolicyCandidate): number => {
    const l = c.latency;
    if (l.lastObserved === undefined || input.now - l.lastObserved > input.staleMs) return 0;
    const v = input.stream ? (l.ttft ?? l.total) : l.total;
    return v ?? 0;
  };
  const scores = cands.map(score);
  const order = cands.map((_, i) => i).sort((a, b) => (scores[a] as number) - (scores[b] as number) || a - b);
  if (order.length > 1 && input.rand() < input.exploreRate) {
    const pick = 1 + Math.floor(input.rand() * (order.length - 1));
    const [explored] = order.splice(pick, 1);
    if (explored !== undefined) order.unshift(explored);
  }
  return order;
}

/** The attempt order, as indices into `cands`. */
export function orderTargets(policy: PolicyName, cands: readonly PolicyCandidate[], input: PolicyInput): number[] {
  switch (policy) {
    case 'fallback':
      return cands.map((_, i) => i);
    case 'weighted':
      return weighted(cands, input);
    case 'cost':
      return byCost(cands, input);
    case 'latency':
      return byLatency(cands, input);
    default: {
      const never: never = policy;
      throw new Error(`unknown policy ${String(never)}`);
    }
  }
}
