/**
 * The in-memory StateStore: limits in Maps, cached answers in an LRU bounded by entries and bytes
 * with a TTL. Needs nothing else to run; used alone (state.store: memory) or as the local fallback
 * of the Redis store.
 */
import { randomUUID } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { BlobLru } from './blob-lru.ts';
import { gcra, gcraAdjust } from '../../limits/gcra.ts';
import { SharedHealthTable, type HealthOp, type HealthSettings, type HealthView } from '../health/shared-health.ts';
import {
  LEASE_TTL_MS,
  WINDOW_MS,
  type AdmitRequest,
  type AdmitResult,
  type StateStore,
  type StoreStatus,
  type Ticket,
} from './contract.ts';

interface KeyState {
  /** TATs of the request and token allowances */
  rq: number;
  tk: number;
  /** lease id → expiry (ms) */
  leases: Map<string, number>;
}

export interface MemoryStoreOptions {
  maxEntries: number;
  maxBytes: number;
  /** most bytes of blobs (stored Responses) until blobLimit() sets it; default 256 MiB */
  maxBlobBytes?: number;
  now?: () => number;
  /** marks tickets as local (the Redis store's fallback) */
  local?: boolean;
}

export const DEFAULT_MAX_BLOB_BYTES = 256 * 1024 * 1024;

export class MemoryStore implements StateStore {
  readonly kind = 'memory' as const;
  private readonly keys = new Map<string, KeyState>();
  /** period key → { nano-USD spent, expiry } */
  private readonly spend = new Map<string, { nano: number; expires: number }>();
  private readonly cache: LRUCache<string, string>;
  private readonly blobs: BlobLru;
  private readonly now: () => number;
  private readonly local: boolean;
  private ops = 0;

  constructor(opts: MemoryStoreOptions) {
    this.now = opts.now ?? Date.now;
    this.local = opts.local ?? false;
    this.cache = new LRUCache<string, string>({
      max: opts.maxEntries,
      maxSize: opts.maxBytes,
      sizeCalculation: (v, k) => Math.max(1, v.length * 2 + k.length),
      ttlAutopurge: false,
      perf: { now: () => this.now() },
    });
    this.blobs = new BlobLru(opts.maxBlobBytes ?? DEFAULT_MAX_BLOB_BYTES, () => this.now());
  }

  private state(key: string): KeyState {
    let s = this.keys.get(key);
    if (!s) {
      s = { rq: 0, tk: 0, leases: new Map() };
      this.keys.set(key, s);
    }
    return s;
  }

  /** Forgets keys whose allowances are full again and that hold no lease. */
  private sweep(now: number): void {
    if (++this.ops % 1024 !== 0) return;
    for (const [k, s] of this.keys) {
      for (const [id, exp] of s.leases) if (exp <= now) s.leases.delete(id);
      if (s.rq <= now && s.tk <= now && s.leases.size === 0) this.keys.delete(k);
    }
    for (const [k, v] of this.spend) if (v.expires <= now) this.spend.delete(k);
  }

  async admit(r: AdmitRequest): Promise<AdmitResult> {
    return this.admitSync(r);
  }

  admitSync(r: AdmitRequest): AdmitResult {
    const now = this.now();
    this.sweep(now);
    const s = this.state(r.key);
    const out: AdmitResult = { allowed: false, retryAfterMs: 0 };
    let refused: AdmitResult['refused'];
    let retry = 0;

    if (r.budgetNano !== undefined && r.period !== undefined) {
      const spent = this.spentNano(r.key, r.period, now);
      out.spentNano = spent;
      if (spent >= r.budgetNano) refused ??= 'budget';
    }
    if (r.maxConcurrent !== undefined) {
      for (const [id, exp] of s.leases) if (exp <= now) s.leases.delete(id);
      if (s.leases.size >= r.maxConcurrent) {
        refused ??= 'concurrency';
        retry ||= 1000;
      }
    }
    const rq = r.rpm !== undefined ? gcra(s.rq, now, r.countRequest ? 1 : 0, r.rpm, WINDOW_MS) : undefined;
    if (rq && r.rpm !== undefined) {
      out.requests = { limit: r.rpm, remaining: rq.remaining, resetMs: rq.resetMs };
      if (!rq.allowed) {
        refused ??= 'requests';
        retry ||= rq.retryAfterMs;
      }
    }
    const tk = r.tpm !== undefined ? gcra(s.tk, now, r.tokens, r.tpm, WINDOW_MS) : undefined;
    if (tk && r.tpm !== undefined) {
      out.tokens = { limit: r.tpm, remaining: tk.remaining, resetMs: tk.resetMs };
      if (!tk.allowed) {
        refused ??= 'tokens';
        retry ||= tk.retryAfterMs;
      }
    }
    if (refused) {
      out.refused = refused;
      out.retryAfterMs = retry;
      // a refused request changes nothing: report the allowances as they are
      if (rq && out.requests && rq.allowed && r.countRequest) out.requests = { ...out.requests, remaining: out.requests.remaining + 1 };
      if (tk && out.tokens && tk.allowed && r.tpm !== undefined && r.tokens > 0) {
        const peek = gcra(s.tk, now, 0, r.tpm, WINDOW_MS);
        out.tokens = { limit: r.tpm, remaining: peek.remaining, resetMs: peek.resetMs };
      }
      return out;
    }
    if (rq) s.rq = rq.tat;
    if (tk) s.tk = tk.tat;
    let leaseId: string | undefined;
    if (r.maxConcurrent !== undefined) {
      leaseId = randomUUID();
      s.leases.set(leaseId, now + LEASE_TTL_MS);
    }
    out.allowed = true;
    out.ticket = { key: r.key, tpm: r.tpm, leaseId, local: this.local };
    return out;
  }

  private spentNano(key: string, period: string, now: number): number {
    const e = this.spend.get(`${key}\u0000${period}`);
    return e && e.expires > now ? e.nano : 0;
  }

  async settle(t: Ticket, tokensDelta: number, spend?: { period: string; nano: number; ttlMs: number }): Promise<void> {
    const now = this.now();
    if (t.tpm !== undefined && tokensDelta !== 0) {
      const s = this.state(t.key);
      s.tk = gcraAdjust(s.tk, now, tokensDelta, t.tpm, WINDOW_MS);
    }
    if (spend && spend.nano > 0) {
      const k = `${t.key}\u0000${spend.period}`;
      const e = this.spend.get(k);
      if (e && e.expires > now) e.nano += spend.nano;
      else this.spend.set(k, { nano: spend.nano, expires: now + spend.ttlMs });
    }
  }

  async release(t: Ticket): Promise<void> {
    if (t.leaseId !== undefined) this.keys.get(t.key)?.leases.delete(t.leaseId);
  }

  async refresh(tickets: readonly Ticket[]): Promise<void> {
    const exp = this.now() + LEASE_TTL_MS;
    for (const t of tickets) {
      const leases = t.leaseId !== undefined ? this.keys.get(t.key)?.leases : undefined;
      if (leases && t.leaseId !== undefined && leases.has(t.leaseId)) leases.set(t.leaseId, exp);
    }
  }

  async cacheGet(key: string): Promise<string | undefined> {
    return this.cache.get(key);
  }

  async cacheSet(key: string, value: string, ttlMs: number): Promise<void> {
    this.cache.set(key, value, { ttl: ttlMs });
  }

  async blobGet(key: string): Promise<string | undefined> {
    return this.blobs.get(key);
  }

  async blobSet(key: string, value: string, ttlMs: number): Promise<boolean> {
    return this.blobs.set(key, value, ttlMs);
  }

  async blobDelete(key: string): Promise<boolean> {
    return this.blobs.delete(key);
  }

  blobLimit(maxBytes: number): void {
    this.blobs.setLimit(maxBytes);
  }

  /** Blobs held now and their bytes (for /status and tests). */
  blobStats(): { entries: number; bytes: number } {
    return { entries: this.blobs.size, bytes: this.blobs.bytes };
  }

  cacheEntries(): number {
    return this.cache.size;
  }

  private healthTable: SharedHealthTable | undefined;

  /** Shared target health for this process's generations, or for cluster workers over IPC. */
  healthSync(ops: HealthOp[], settings: HealthSettings): HealthView[] {
    this.healthTable ??= new SharedHealthTable();
    return this.healthTable.apply(ops, settings, this.now());
  }

  async health(ops: HealthOp[], settings: HealthSettings): Promise<HealthView[]> {
    return this.healthSync(ops, settings);
  }

  status(): StoreStatus {
    return { store: 'memory', state: 'ok' };
  }

  async close(): Promise<void> {
    this.cache.clear();
    this.blobs.clear();
  }
}
