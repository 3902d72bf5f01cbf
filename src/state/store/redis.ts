/**
 * The Redis StateStore (`state.store: redis`): replicas behind a load balancer share one set of
 * limits and one response cache. Limits are updated atomically by Lua scripts (redis-scripts.ts);
 * cached answers are plain keys with a TTL.
 *
 * When Redis is unreachable (refused, timed out, a command slower than `command_timeout_ms`) the
 * store says so once in the logs and in /ready, and then, by `on_unavailable`:
 *   open (default)  limits and cache fall back to this replica's own memory (each replica enforces
 *                   its limits alone, so a fleet of N admits up to N× a key's limit meanwhile);
 *   closed          requests of keys with limits get 503 `state_unavailable`, nothing is cached.
 * The client reconnects by itself; once Redis answers again the store logs it and uses it again.
 *
 * ioredis is loaded when a Redis store is built, not with the gateway (about 10 MB of resident
 * memory a gateway on the memory store does not need).
 */
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Redis } from 'ioredis';
import { GatewayError } from '../../errors/gateway-error.ts';
import type { Logger } from '../../telemetry/logger.ts';
import { MemoryStore } from './memory.ts';
import { cacheEntryKey, redisFlights } from '../flights/redis-flights.ts';
import { ADMIT_S, HEALTH_S, REFRESH_S, SETTLE_S, runScript, type Script } from './redis-scripts.ts';
import type { SharedFlights } from '../flights/shared-flights.ts';
import type { HealthOp, HealthSettings, HealthView, SharedBreakerState } from '../health/shared-health.ts';
import {
  LEASE_TTL_MS,
  WINDOW_MS,
  type AdmitRequest,
  type AdmitResult,
  type LimitName,
  type StateStore,
  type StoreStatus,
  type Ticket,
} from './contract.ts';

export interface RedisStoreOptions {
  url: string;
  keyPrefix: string;
  onUnavailable: 'open' | 'closed';
  commandTimeoutMs: number;
  /** bounds of the local fallback cache */
  maxEntries: number;
  maxBytes: number;
  logger: Logger;
}

const BREAKER_STATES: readonly SharedBreakerState[] = ['closed', 'open', 'half_open'];
const PROBE: readonly HealthView['probe'][] = ['none', 'mine', 'other'];

export function stateUnavailable(what = 'check this key\u2019s limits'): GatewayError {
  return new GatewayError('state_unavailable', `The gateway cannot reach its shared state store (Redis) to ${what}; try again shortly.`, { retryAfter: 5 });
}

/** Removes credentials from a redis:// URL for logs. */
function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return 'redis://?';
  }
}

export class RedisStore implements StateStore {
  readonly kind = 'redis' as const;
  readonly flights: SharedFlights;
  private readonly redis: Redis;
  private readonly local: MemoryStore;
  private up = false;
  private lastError: string | undefined = 'connecting';
  private closed = false;
  /** last probe of a live connection that was marked down */
  private probeAt = 0;

  constructor(private readonly opts: RedisStoreOptions) {
    this.local = new MemoryStore({ maxEntries: opts.maxEntries, maxBytes: opts.maxBytes, local: true });
    const { Redis: Client } = createRequire(import.meta.url)('ioredis') as typeof import('ioredis');
    this.redis = new Client(opts.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: opts.commandTimeoutMs,
      connectTimeout: Math.max(1000, opts.commandTimeoutMs * 4),
      retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 5), 2000),
      lazyConnect: false,
    });
    this.redis.on('ready', () => {
      const was = this.lastError;
      if (this.up) return;
      this.up = true;
      this.lastError = undefined;
      if (was === 'connecting') opts.logger.info('state store connected', { store: 'redis', url: safeUrl(opts.url) });
      else opts.logger.warn('state store recovered', { store: 'redis', url: safeUrl(opts.url) });
    });
    this.flights = redisFlights(this.redis, opts.keyPrefix, opts.commandTimeoutMs, { usable: () => this.available(), ok: () => this.ok(), failed: (err) => this.down(err) });
    this.redis.on('error', (err: Error) => this.down(err));
    this.redis.on('close', () => {
      if (!this.closed) this.down(new Error('connection closed'));
    });
  }

  /** Resolves once connected, or after `ms` (start-up does not wait for a Redis that is down). */
  async ready(ms: number): Promise<boolean> {
    if (this.up) return true;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.redis.off('ready', onReady);
        resolve(false);
      }, ms);
      const onReady = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      this.redis.once('ready', onReady);
    });
  }

  private down(err: Error): void {
    if (this.closed) return;
    const first = this.up || this.lastError === 'connecting';
    this.up = false;
    this.lastError = err.message || 'unreachable';
    if (first) {
      this.opts.logger.error('state store unavailable', {
        store: 'redis',
        url: safeUrl(this.opts.url),
        error: this.lastError.slice(0, 200),
        on_unavailable: this.opts.onUnavailable,
      });
    }
  }

  /**
   * Whether to use Redis for the next command. After a failed command on a live connection (a
   * timeout: Redis slow, not gone) one probe per second is let through; its success recovers.
   */
  private available(): boolean {
    if (this.redis.status !== 'ready') return false;
    if (this.up) return true;
    const now = Date.now();
    if (now - this.probeAt < 1000) return false;
    this.probeAt = now;
    return true;
  }

  /** A command succeeded: Redis is back if it was marked down. */
  private ok(): void {
    if (this.up) return;
    this.up = true;
    this.lastError = undefined;
    this.opts.logger.warn('state store recovered', { store: 'redis', url: safeUrl(this.opts.url) });
  }

  private run(s: Script, keys: string[], args: Array<string | number>): Promise<unknown> {
    return runScript(this.redis, s, keys, args);
  }

  private k(key: string, part: string): string {
    return `${this.opts.keyPrefix}{l:${key}}:${part}`;
  }

  async admit(r: AdmitRequest): Promise<AdmitResult> {
    if (!this.available()) return this.fallbackAdmit(r);
    const leaseId = r.maxConcurrent !== undefined ? randomUUID() : '';
    let reply: unknown;
    try {
      reply = await this.run(
        ADMIT_S,
        [this.k(r.key, 'rq'), this.k(r.key, 'tk'), this.k(r.key, 'cc'), this.k(r.key, `b:${r.period ?? '-'}`)],
        [
          r.rpm ?? '',
          r.tpm ?? '',
          Math.max(0, Math.round(r.tokens)),
          r.countRequest ? 1 : 0,
          r.maxConcurrent ?? '',
          leaseId,
          LEASE_TTL_MS,
          r.budgetNano !== undefined && r.period !== undefined ? Math.round(r.budgetNano) : '',
          WINDOW_MS,
        ],
      );
    } catch (err) {
      this.down(err as Error);
      return this.fallbackAdmit(r);
    }
    this.ok();
    const a = Array.isArray(reply) ? reply : [];
    const num = (i: number): number => Number(a[i] ?? 0);
    const allowed = num(0) === 1;
    const retry = num(2);
    const out: AdmitResult = { allowed, retryAfterMs: retry < 0 ? Number.POSITIVE_INFINITY : retry };
    const refused = String(a[1] ?? '');
    if (refused !== '') out.refused = refused as LimitName;
    if (r.rpm !== undefined) out.requests = { limit: r.rpm, remaining: num(3), resetMs: num(4) };
    if (r.tpm !== undefined) out.tokens = { limit: r.tpm, remaining: num(5), resetMs: num(6) };
    if (r.budgetNano !== undefined) out.spentNano = num(7);
    if (allowed) out.ticket = { key: r.key, tpm: r.tpm, leaseId: leaseId === '' ? undefined : leaseId, local: false };
    return out;
  }

  private fallbackAdmit(r: AdmitRequest): Promise<AdmitResult> {
    if (this.opts.onUnavailable === 'closed') throw stateUnavailable();
    return this.local.admit(r);
  }

  async settle(t: Ticket, tokensDelta: number, spend?: { period: string; nano: number; ttlMs: number }): Promise<void> {
    if (t.local) return this.local.settle(t, tokensDelta, spend);
    if (!this.available()) return; // lost: the reservation stands until it drains
    try {
      await this.run(
        SETTLE_S,
        [this.k(t.key, 'tk'), this.k(t.key, `b:${spend?.period ?? '-'}`)],
        [t.tpm ?? '', Math.round(tokensDelta), WINDOW_MS, Math.max(0, Math.round(spend?.nano ?? 0)), Math.max(1, Math.round(spend?.ttlMs ?? 1))],
      );
    } catch (err) {
      this.down(err as Error);
    }
  }

  async release(t: Ticket): Promise<void> {
    if (t.leaseId === undefined) return;
    if (t.local) return this.local.release(t);
    if (!this.available()) return; // the lease expires by itself (LEASE_TTL_MS)
    try {
      await this.redis.zrem(this.k(t.key, 'cc'), t.leaseId);
    } catch (err) {
      this.down(err as Error);
    }
  }

  async refresh(tickets: readonly Ticket[]): Promise<void> {
    await this.local.refresh(tickets.filter((t) => t.local));
    if (!this.available()) return;
    const byKey = new Map<string, string[]>();
    for (const t of tickets) {
      if (t.local || t.leaseId === undefined) continue;
      const ids = byKey.get(t.key) ?? [];
      ids.push(t.leaseId);
      byKey.set(t.key, ids);
    }
    try {
      for (const [key, ids] of byKey) await this.run(REFRESH_S, [this.k(key, 'cc')], [LEASE_TTL_MS, ...ids]);
    } catch (err) {
      this.down(err as Error);
    }
  }

  async cacheGet(key: string): Promise<string | undefined> {
    if (!this.available()) return this.opts.onUnavailable === 'open' ? this.local.cacheGet(key) : undefined;
    try {
      const v = await this.redis.get(cacheEntryKey(this.opts.keyPrefix, key));
      this.ok();
      return v ?? undefined;
    } catch (err) {
      this.down(err as Error);
      return undefined;
    }
  }

  async cacheSet(key: string, value: string, ttlMs: number): Promise<void> {
    if (!this.available()) {
      if (this.opts.onUnavailable === 'open') await this.local.cacheSet(key, value, ttlMs);
      return;
    }
    try {
      await this.redis.set(cacheEntryKey(this.opts.keyPrefix, key), value, 'PX', Math.max(1, Math.round(ttlMs)));
    } catch (err) {
      this.down(err as Error);
    }
  }

  private b(key: string): string {
    return `${this.opts.keyPrefix}b:${key}`;
  }

  /**
   * A blob is read from Redis, then from this replica's memory (where it was kept while Redis was
   * unavailable, on_unavailable: open). When Redis cannot answer and memory does not have it, the
   * answer is unknown: 503, not "not found".
   */
  async blobGet(key: string): Promise<string | undefined> {
    const open = this.opts.onUnavailable === 'open';
    if (this.available()) {
      try {
        const v = await this.redis.get(this.b(key));
        this.ok();
        if (v !== null) return v;
        return open ? this.local.blobGet(key) : undefined;
      } catch (err) {
        this.down(err as Error);
      }
    }
    const v = open ? await this.local.blobGet(key) : undefined;
    if (v === undefined) throw stateUnavailable('read a stored response');
    return v;
  }

  async blobSet(key: string, value: string, ttlMs: number): Promise<boolean> {
    if (this.available()) {
      try {
        await this.redis.set(this.b(key), value, 'PX', Math.max(1, Math.round(ttlMs)));
        this.ok();
        return true;
      } catch (err) {
        this.down(err as Error);
      }
    }
    return this.opts.onUnavailable === 'open' ? this.local.blobSet(key, value, ttlMs) : false;
  }

  async blobDelete(key: string): Promise<boolean> {
    const local = await this.local.blobDelete(key);
    if (this.available()) {
      try {
        const n = await this.redis.del(this.b(key));
        this.ok();
        return n > 0 || local;
      } catch (err) {
        this.down(err as Error);
      }
    }
    if (local) return true;
    throw stateUnavailable('delete a stored response');
  }

  blobLimit(maxBytes: number): void {
    this.local.blobLimit(maxBytes);
  }

  /**
   * Shared target health: one HEALTH script per target, sent together. Keys
   * `<prefix>{h:<backend>/<model>}:health` (hash) and `…:probe` (the probe lease). Throws while
   * Redis is unavailable: the caller falls back to its own breakers (on_unavailable does not apply).
   */
  async health(ops: HealthOp[], s: HealthSettings): Promise<HealthView[]> {
    if (!this.available()) throw new Error(`redis unreachable (${this.lastError ?? 'not connected'})`);
    const ttl = Math.max(3_600_000, 2 * s.max_open_ms + s.window_ms);
    const head = [s.failure_rate, s.min_requests, s.window_ms, s.consecutive_failures, s.open_ms, s.max_open_ms, s.alpha, s.penalty_ms, s.lease_ms, ttl];
    let replies: unknown[];
    try {
      replies = await Promise.all(
        ops.map((op) => {
          const args: Array<string | number> = [...head, op.owner];
          for (const e of op.events) {
            if (e.k === 'l') args.push('l', e.total, e.ttft ?? '');
            else if (e.k === 's') args.push('s', e.n ?? 1, '');
            else args.push(e.k, '', '');
          }
          const base = `${this.opts.keyPrefix}{h:${op.target}}`;
          return this.run(HEALTH_S, [`${base}:health`, `${base}:probe`], args);
        }),
      );
    } catch (err) {
      this.down(err as Error);
      throw err;
    }
    this.ok();
    return replies.map((reply) => {
      const a = Array.isArray(reply) ? reply : [];
      const num = (i: number): number => Number(a[i] ?? 0);
      const opt = (i: number): number | null => (a[i] === '' || a[i] === undefined ? null : Number(a[i]));
      const age = num(9);
      return {
        state: BREAKER_STATES[num(0)] ?? 'closed',
        remaining_ms: num(1),
        open_ms: num(2),
        ok: num(3),
        fail: num(4),
        probe: PROBE[num(5)] ?? 'none',
        total: opt(6),
        ttft: opt(7),
        samples: num(8),
        age_ms: age < 0 ? null : age,
      };
    });
  }

  status(): StoreStatus {
    if (this.up && this.redis.status === 'ready') return { store: 'redis', state: 'ok' };
    return {
      store: 'redis',
      state: 'degraded',
      detail: `redis unreachable (${this.lastError ?? 'not connected'}); ${this.opts.onUnavailable === 'open' ? 'serving with local limits and cache' : 'refusing keys with limits'}`,
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.flights.close();
    this.redis.disconnect();
    await this.local.close();
  }
}
