/**
 * StateStore: where per-key limits and cached answers live. `memory` (the default, no
 * dependencies) keeps them in this process; `redis` shares them between replicas, with every limit
 * update done atomically in a Lua script. Limits are one composite operation — budget, concurrency,
 * requests and tokens are checked together and consumed only if all of them pass — so a refused
 * request never leaves a partial charge behind. Blobs are whole values with a TTL (stored
 * Responses, for `previous_response_id` on any replica).
 */

import type { HealthOp, HealthSettings, HealthView } from '../health/shared-health.ts';
import type { SharedFlights } from '../flights/shared-flights.ts';

export type LimitName = 'requests' | 'tokens' | 'concurrency' | 'budget';

export interface AdmitRequest {
  /** Limit key (the API key's name). */
  key: string;
  /** Requests per minute; undefined = not limited. */
  rpm?: number | undefined;
  /** Tokens per minute; undefined = not limited. */
  tpm?: number | undefined;
  /** Tokens to reserve (0 only reports the token allowance). */
  tokens: number;
  /** Count one request against rpm (false only reports it). */
  countRequest: boolean;
  /** Take a concurrency lease under this maximum; undefined = none. */
  maxConcurrent?: number | undefined;
  /** Budget in nano-USD for `period`; undefined = not checked. */
  budgetNano?: number | undefined;
  /** Budget period id, e.g. "d2026-11-30" or "m2026-11". */
  period?: string | undefined;
}

export interface Allowance {
  limit: number;
  remaining: number;
  /** ms until the allowance is full again */
  resetMs: number;
}

export interface AdmitResult {
  allowed: boolean;
  /** Which limit refused it (the first one checked: budget, concurrency, requests, tokens). */
  refused?: LimitName;
  /** ms until it could pass; Infinity when it never can (more tokens than the whole tpm). */
  retryAfterMs: number;
  requests?: Allowance;
  tokens?: Allowance;
  /** nano-USD spent in the period so far (when a budget was checked) */
  spentNano?: number;
  /** Opaque handle for settle/release; present when allowed. */
  ticket?: Ticket;
}

/** What an admitted request holds: its token reservation and its concurrency lease. */
export interface Ticket {
  readonly key: string;
  readonly tpm: number | undefined;
  readonly leaseId: string | undefined;
  /** Which store took it: a request admitted by the local fallback is settled there too. */
  readonly local: boolean;
}

export interface StoreStatus {
  store: 'memory' | 'redis';
  /** ok; degraded = Redis unreachable, serving from local state (open) or refusing limited keys (closed) */
  state: 'ok' | 'degraded';
  detail?: string;
}

export interface StateStore {
  readonly kind: 'memory' | 'redis';
  admit(r: AdmitRequest): Promise<AdmitResult>;
  /** Token reconcile (delta may be negative) and spend, once the real usage is known. */
  settle(t: Ticket, tokensDelta: number, spend?: { period: string; nano: number; ttlMs: number }): Promise<void>;
  /** Gives the concurrency lease back. */
  release(t: Ticket): Promise<void>;
  /** Keeps leases of long requests alive (a crashed replica's leases expire instead of leaking). */
  refresh(tickets: readonly Ticket[]): Promise<void>;
  cacheGet(key: string): Promise<string | undefined>;
  cacheSet(key: string, value: string, ttlMs: number): Promise<void>;
  /**
   * Values written and read whole, with a TTL (stored Responses). Memory: bounded by `blobLimit`
   * bytes across all of them (least recently used go first); Redis: one key each with an expiry
   * (bounded by Redis's own `maxmemory`).
   * Redis unavailable: `on_unavailable: open` keeps them in this replica's memory meanwhile; a
   * read or delete that only Redis could answer throws 503 `state_unavailable`.
   */
  blobGet(key: string): Promise<string | undefined>;
  /** false: not kept (larger than the memory bound, or Redis unavailable with on_unavailable: closed). */
  blobSet(key: string, value: string, ttlMs: number): Promise<boolean>;
  /** true when a live value was deleted. */
  blobDelete(key: string): Promise<boolean>;
  /** Most bytes across all blobs held in this process's memory (may change on a reload). */
  blobLimit(maxBytes: number): void;
  status(): StoreStatus;
  /** Cached entries held now, when the store can tell without a scan (for /status). */
  cacheEntries?(): number;
  /**
   * Shared per-target health (routing.shared_health; state/health/shared-health.ts): applies each op's
   * events and answers the target's state, one view per op. Throws when the shared state cannot be
   * reached (the caller then uses its own breakers).
   */
  health?(ops: HealthOp[], settings: HealthSettings): Promise<HealthView[]>;
  /**
   * Coalescing across processes (state/flights/shared-flights.ts): only stores shared by several
   * processes have it (Redis, the primary's memory store in workers); one process's memory store
   * coalesces in the process alone, at no cost.
   */
  readonly flights?: SharedFlights;
  close(): Promise<void>;
}

/** A concurrency lease lives this long without a refresh. */
export const LEASE_TTL_MS = 120_000;
/** Rate windows are one minute. */
export const WINDOW_MS = 60_000;
