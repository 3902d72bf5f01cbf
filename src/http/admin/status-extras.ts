/**
 * The /status sections that come from the cache and the limits: cache counts and hit rate (from
 * the request metrics), and each limited key's current usage against its limits, read from the
 * state store without taking anything (a report-only admit: no request counted, no tokens, no
 * lease). The section shapes are exported so the HTML page can render them as tables.
 */
import type { Config } from '../../config/schema.ts';
import { budgetPeriod } from '../../limits/limiter.ts';
import type { StateStore, StoreStatus } from '../../state/store/contract.ts';
import type { Metrics } from '../../telemetry/metrics.ts';

export interface CacheSection {
  enabled: boolean;
  /** requests answered from the cache (coalesced ones included) */
  hit: number;
  miss: number;
  bypass: number;
  /** hits that shared another request's upstream call in flight; null when not known */
  coalesced: number | null;
  /** entries stored now; null when the store cannot tell cheaply (Redis) */
  entries: number | null;
  /** hit / (hit + miss); null before any lookup */
  hit_rate: number | null;
}

/** Live figures the metrics do not hold. */
export interface CacheLive {
  coalesced?: () => number | undefined;
  entries?: () => number | undefined;
}

export async function cacheSection(metrics: Metrics, enabled: boolean, live: CacheLive = {}): Promise<CacheSection> {
  const counts = { hit: 0, miss: 0, bypass: 0 };
  for (const v of (await metrics.requests.get()).values) {
    const c = v.labels.cache;
    if (c === 'hit' || c === 'miss' || c === 'bypass') counts[c] += v.value;
  }
  const lookups = counts.hit + counts.miss;
  return {
    enabled,
    ...counts,
    coalesced: live.coalesced?.() ?? null,
    entries: live.entries?.() ?? null,
    hit_rate: lookups === 0 ? null : Math.round((counts.hit / lookups) * 1000) / 1000,
  };
}

export interface KeyUsage {
  requests: { limit: number; remaining: number } | null;
  tokens: { limit: number; remaining: number } | null;
  max_concurrent: number | null;
  /** leases held now for this key by this process (with Redis: by this replica) */
  concurrency: { in_use: number | null; limit: number } | null;
  budget: { limit_usd: number; spent_usd: number | null; period: string | null } | null;
}

export type KeyStatus = KeyUsage | { limits: 'none' } | { error: string };

/** `state` is the store's status; every other entry is a configured key by name. */
export type KeysSection = { state?: StoreStatus } & { [key: string]: KeyStatus | StoreStatus | undefined };

export async function keysSection(
  config: Config,
  store: StateStore | undefined,
  now = Date.now(),
  leasesHeld?: (key: string) => number,
): Promise<KeysSection> {
  const out: KeysSection = {};
  if (store) out.state = store.status();
  for (const k of config.keys ?? []) {
    const l = k.limits;
    if (!l || !store) {
      out[k.name] = { limits: 'none' };
      continue;
    }
    const period = l.budget_usd !== undefined ? budgetPeriod(now, l.budget_period) : undefined;
    try {
      const r = await store.admit({
        key: k.name,
        rpm: l.rpm,
        tpm: l.tpm,
        tokens: 0,
        countRequest: false,
        budgetNano: l.budget_usd !== undefined ? l.budget_usd * 1e9 : undefined,
        period: period?.id,
      });
      const usage: KeyUsage = {
        requests: r.requests ? { limit: r.requests.limit, remaining: r.requests.remaining } : null,
        tokens: r.tokens ? { limit: r.tokens.limit, remaining: r.tokens.remaining } : null,
        max_concurrent: l.max_concurrent ?? null,
        concurrency: l.max_concurrent !== undefined ? { in_use: leasesHeld?.(k.name) ?? null, limit: l.max_concurrent } : null,
        budget:
          l.budget_usd !== undefined
            ? { limit_usd: l.budget_usd, spent_usd: r.spentNano !== undefined ? r.spentNano / 1e9 : null, period: period?.id ?? null }
            : null,
      };
      out[k.name] = usage;
    } catch {
      out[k.name] = { error: 'state store unavailable' };
    }
  }
  return out;
}
