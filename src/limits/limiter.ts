/**
 * Per-key limits: requests and tokens per minute (GCRA), concurrent requests (leases) and a USD
 * budget per day or month. `admit` checks everything a request needs in one atomic store call and
 * either refuses it (429 naming the limit, with `retry-after`) or hands back an Admission that
 * holds the token reservation and the concurrency lease until `settle` and `release`.
 */
import type { LimitsConfig } from '../config/schema.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { LEASE_TTL_MS, type AdmitResult, type Allowance, type LimitName, type StateStore, type Ticket } from '../state/store/contract.ts';

export interface Principal {
  /** the key's name */
  name: string;
  limits?: LimitsConfig | undefined;
  /** public models this key may use; undefined = all */
  models?: readonly string[] | undefined;
  /** cache namespace */
  namespace: string;
}

export interface Usage {
  prompt_tokens?: number | null | undefined;
  completion_tokens?: number | null | undefined;
}

export interface Price {
  input: number;
  output: number;
}

/** Go-style duration, as OpenAI writes x-ratelimit-reset-*: "20ms", "1.5s", "6m0s". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms <= 0) return '0s';
  if (ms < 1000) return `${Math.ceil(ms)}ms`;
  const totalS = ms / 1000;
  const h = Math.floor(totalS / 3600);
  const m = Math.floor((totalS % 3600) / 60);
  const s = Math.round((totalS % 60) * 1000) / 1000;
  return `${h > 0 ? `${h}h` : ''}${h > 0 || m > 0 ? `${m}m` : ''}${s}s`;
}

/** The budget period a moment falls in (UTC), when it ends, and its id. */
export function budgetPeriod(now: number, period: 'day' | 'month'): { id: string; endsAt: number } {
  const d = new Date(now);
  const y = d.getUTCFullYear();
  const mo = d.getUTCMonth();
  if (period === 'day') {
    const day = d.getUTCDate();
    return { id: `d${y}-${String(mo + 1).padStart(2, '0')}-${String(day).padStart(2, '0')}`, endsAt: Date.UTC(y, mo, day + 1) };
  }
  return { id: `m${y}-${String(mo + 1).padStart(2, '0')}`, endsAt: Date.UTC(y, mo + 1, 1) };
}

const NAMES: Record<LimitName, string> = {
  requests: 'requests per minute (rpm)',
  tokens: 'tokens per minute (tpm)',
  concurrency: 'concurrent requests (max_concurrent)',
  budget: 'budget',
};

function allowanceHeaders(h: Record<string, string>, what: 'requests' | 'tokens', a: Allowance | undefined): void {
  if (!a) return;
  h[`x-ratelimit-limit-${what}`] = String(a.limit);
  h[`x-ratelimit-remaining-${what}`] = String(a.remaining);
  h[`x-ratelimit-reset-${what}`] = formatDuration(a.resetMs);
}

export class Admission {
  private settled = false;
  private released = false;

  constructor(
    private readonly limiter: Limiter,
    readonly ticket: Ticket,
    readonly reserved: number,
    readonly headers: Record<string, string>,
    private readonly period: { id: string; endsAt: number } | undefined,
  ) {}

  /**
   * Reconciles the reservation with what was really used: `usage` from the upstream, 'refund' when
   * nothing was used (a failed call, an answer shared with another request), or undefined when
   * the usage is unknown (the reservation then stands). Spend = usage × price. Once only.
   */
  settle(usage: Usage | 'refund' | undefined, price: Price | undefined): void {
    if (this.settled) return;
    this.settled = true;
    let delta = 0;
    let nano = 0;
    if (usage === 'refund') delta = -this.reserved;
    else if (usage) {
      const pt = usage.prompt_tokens ?? 0;
      const ct = usage.completion_tokens ?? 0;
      delta = pt + ct - this.reserved;
      if (price) nano = Math.round((pt * price.input + ct * price.output) * 1000);
    }
    this.limiter.settleTicket(this.ticket, delta, this.period && nano > 0 ? { period: this.period.id, nano, ttlMs: this.period.endsAt - this.limiter.now() + 86_400_000 } : undefined);
  }

  /** Gives the concurrency lease back. Once only. */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.limiter.releaseTicket(this.ticket);
  }
}

export class Limiter {
  private readonly live = new Set<Ticket>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: StateStore,
    readonly now: () => number = Date.now,
    private readonly onRefused?: (key: string, limit: LimitName) => void,
    private readonly onError?: (err: unknown) => void,
  ) {}

  /** Whether requests of this key need the store at all. */
  static limited(p: Principal | undefined): p is Principal & { limits: LimitsConfig } {
    const l = p?.limits;
    return !!l && (l.rpm !== undefined || l.tpm !== undefined || l.max_concurrent !== undefined || l.budget_usd !== undefined);
  }

  /**
   * `upstream`: the request will (or may) call a backend — reserve `tokens`, take a lease, check the
   * budget. Otherwise (a cache hit) it only counts against rpm and reports the token allowance.
   */
  async admit(p: Principal & { limits: LimitsConfig }, tokens: number, upstream: boolean): Promise<Admission> {
    const l = p.limits;
    const period = l.budget_usd !== undefined ? budgetPeriod(this.now(), l.budget_period) : undefined;
    const r: AdmitResult = await this.store.admit({
      key: p.name,
      rpm: l.rpm,
      tpm: l.tpm,
      tokens: upstream && l.tpm !== undefined ? tokens : 0,
      countRequest: true,
      maxConcurrent: upstream ? l.max_concurrent : undefined,
      budgetNano: upstream && l.budget_usd !== undefined ? l.budget_usd * 1e9 : undefined,
      period: period?.id,
    });
    const headers: Record<string, string> = {};
    allowanceHeaders(headers, 'requests', r.requests);
    allowanceHeaders(headers, 'tokens', r.tokens);
    if (!r.allowed || !r.ticket) {
      const limit = r.refused ?? 'requests';
      this.onRefused?.(p.name, limit);
      throw this.refusal(p, limit, r, tokens, headers, period);
    }
    const reserved = upstream && l.tpm !== undefined ? tokens : 0;
    if (r.ticket.leaseId !== undefined) {
      this.live.add(r.ticket);
      this.timer ??= setInterval(() => void this.refresh(), LEASE_TTL_MS / 3).unref();
    }
    return new Admission(this, r.ticket, reserved, headers, period);
  }

  private refusal(p: Principal & { limits: LimitsConfig }, limit: LimitName, r: AdmitResult, tokens: number, headers: Record<string, string>, period: { endsAt: number } | undefined): GatewayError {
    const l = p.limits;
    const key = `'${p.name}'`;
    if (limit === 'budget') {
      const waitMs = (period?.endsAt ?? this.now()) - this.now();
      const e = new GatewayError(
        'budget_exceeded',
        `Budget exceeded for key ${key}: it has spent $${((r.spentNano ?? 0) / 1e9).toFixed(4)} of its $${l.budget_usd ?? 0} ${l.budget_period === 'day' ? 'daily' : 'monthly'} budget. It resets at ${new Date(period?.endsAt ?? 0).toISOString()}.`,
        { retryAfter: Math.max(1, Math.ceil(waitMs / 1000)) },
      );
      e.exhausted = true;
      e.headers = headers;
      return e;
    }
    if (limit === 'tokens' && !Number.isFinite(r.retryAfterMs)) {
      const e = new GatewayError(
        'rate_limit_exceeded',
        `Request too large for key ${key} on ${NAMES.tokens}: Limit ${l.tpm}, Requested ${tokens} (prompt + max_tokens). Lower max_tokens or shorten the prompt.`,
      );
      e.exhausted = true;
      e.headers = headers;
      return e;
    }
    const waitMs = Math.max(1, r.retryAfterMs);
    const detail =
      limit === 'requests'
        ? `Limit ${l.rpm}, Remaining ${r.requests?.remaining ?? 0}`
        : limit === 'tokens'
          ? `Limit ${l.tpm}, Remaining ${r.tokens?.remaining ?? 0}, Requested ${tokens}`
          : `Limit ${l.max_concurrent}`;
    const e = new GatewayError('rate_limit_exceeded', `Rate limit reached for key ${key} on ${NAMES[limit]}: ${detail}. Please try again in ${formatDuration(waitMs)}.`, {
      retryAfter: Math.max(1, Math.ceil(waitMs / 1000)),
    });
    e.headers = { ...headers, 'retry-after-ms': String(Math.ceil(waitMs)) };
    return e;
  }

  /** Concurrency leases this process holds for `key` now (for /status). */
  leasesHeld(key: string): number {
    let n = 0;
    for (const t of this.live) if (t.key === key) n++;
    return n;
  }

  settleTicket(t: Ticket, delta: number, spend: { period: string; nano: number; ttlMs: number } | undefined): void {
    if (delta === 0 && !spend) return;
    this.store.settle(t, delta, spend).catch((err: unknown) => this.onError?.(err));
  }

  releaseTicket(t: Ticket): void {
    this.live.delete(t);
    if (t.leaseId === undefined) return;
    this.store.release(t).catch((err: unknown) => this.onError?.(err));
  }

  private async refresh(): Promise<void> {
    if (this.live.size === 0) return;
    await this.store.refresh([...this.live]).catch((err: unknown) => this.onError?.(err));
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
