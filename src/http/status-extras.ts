/**
 * The /status sections that come from the cache and the limits: cache hit rate (from the request
 * metrics), and each limited key's current usage against its limits, read from the state store
 * without taking anything (a report-only admit: no request counted, no tokens, no lease).
 */
import type { Config } from '../config/schema.ts';
import { budgetPeriod } from '../limits/limiter.ts';
import type { StateStore } from '../state/store.ts';
import type { Metrics } from '../telemetry/metrics.ts';

export async function cacheSection(metrics: Metrics, enabled: boolean): Promise<Record<string, unknown>> {
  const counts: Record<string, number> = { hit: 0, miss: 0, bypass: 0 };
  for (const v of (await metrics.requests.get()).values) {
    const c = v.labels.cache;
    if (typeof c === 'string' && c in counts) counts[c] = (counts[c] ?? 0) + v.value;
  }
  const lookups = (counts.hit ?? 0) + (counts.miss ?? 0);
  return { enabled, ...counts, hit_rate: lookups === 0 ? null : Math.round(((counts.hit ?? 0) / lookups) * 1000) / 1000 };
}

export async function keysSection(config: Config, store: StateStore | undefined, now = Date.now()): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
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
      out[k.name] = {
        requests: r.requests ? { limit: r.requests.limit, remaining: r.requests.remaining } : null,
        tokens: r.tokens ? { limit: r.tokens.limit, remaining: r.tokens.remaining } : null,
        max_concurrent: l.max_concurrent ?? null,
        budget:
          l.budget_usd !== undefined
            ? { limit_usd: l.budget_usd, spent_usd: r.spentNano !== undefined ? r.spentNano / 1e9 : null, period: period?.id ?? null }
            : null,
      };
    } catch {
      out[k.name] = { error: 'state store unavailable' };
    }
  }
  return out;
}
