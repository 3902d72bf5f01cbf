/**
 * Shared flights in one process's memory: the cluster primary holds one table for all its
 * workers (they reach it over IPC, state/ipc.ts). Claims expire by the clock as Redis keys do; a
 * read waits (long poll) until an entry arrives, the claim goes or `waitMs` passes. Logs of
 * leaders that went away are dropped once their TTL has passed without an append or refresh.
 */
import type { FlightDriver, FlightEntry, FlightRead } from './shared-flights.ts';

interface Log {
  entries: FlightEntry[];
  followers: Set<string>;
  /** dropped after this (epoch ms) */
  until: number;
  waiters: Array<() => void>;
}

export class FlightTable implements FlightDriver {
  private readonly claims = new Map<string, { id: string; until: number }>();
  private readonly logs = new Map<string, Log>();

  constructor(private readonly now: () => number = Date.now) {}

  private log(key: string, id: string): Log | undefined {
    const l = this.logs.get(`${key}\n${id}`);
    return l && l.until > this.now() ? l : undefined;
  }

  private held(key: string, id: string): boolean {
    const c = this.claims.get(key);
    return c !== undefined && c.id === id && c.until > this.now();
  }

  private sweep(): void {
    const now = this.now();
    for (const [k, c] of this.claims) if (c.until <= now) this.claims.delete(k);
    for (const [k, l] of this.logs) {
      if (l.until > now) continue;
      this.logs.delete(k);
      wake(l);
    }
  }

  async claim(key: string, id: string, ttlMs: number): Promise<string> {
    this.sweep();
    const c = this.claims.get(key);
    if (c) return c.id;
    const until = this.now() + ttlMs;
    this.claims.set(key, { id, until });
    this.logs.set(`${key}\n${id}`, { entries: [], followers: new Set(), until, waiters: [] });
    return id;
  }

  async refresh(key: string, id: string, ttlMs: number): Promise<number> {
    const c = this.claims.get(key);
    const l = this.log(key, id);
    if (!c || c.id !== id || c.until <= this.now() || !l) return -1;
    c.until = this.now() + ttlMs;
    l.until = Math.max(l.until, c.until);
    return l.followers.size;
  }

  async append(key: string, id: string, entries: FlightEntry[], ttlMs: number): Promise<void> {
    const l = this.log(key, id);
    if (!l) return;
    for (const e of entries) l.entries.push(e);
    l.until = Math.max(l.until, this.now() + ttlMs);
    wake(l);
  }

  async release(key: string, id: string, lingerMs: number): Promise<void> {
    if (this.claims.get(key)?.id === id) this.claims.delete(key);
    const l = this.log(key, id);
    if (!l) return;
    l.until = this.now() + lingerMs;
    wake(l);
  }

  async attach(key: string, id: string, follower: string): Promise<void> {
    this.log(key, id)?.followers.add(follower);
  }

  async detach(key: string, id: string, follower: string): Promise<void> {
    this.log(key, id)?.followers.delete(follower);
  }

  async read(key: string, id: string, cursor: string, waitMs: number): Promise<FlightRead> {
    const from = cursor === '' ? 0 : Number(cursor);
    const l = this.log(key, id);
    if (l && l.entries.length <= from && this.held(key, id)) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, waitMs);
        function done(): void {
          clearTimeout(timer);
          resolve();
        }
        l.waiters.push(done);
      });
    }
    const entries = this.log(key, id)?.entries.slice(from) ?? [];
    return { entries, cursor: String(from + entries.length), held: this.held(key, id) };
  }

  /** Flights whose logs are held now (for tests and /status). */
  get size(): number {
    this.sweep();
    return this.logs.size;
  }

  close(): void {
    for (const l of this.logs.values()) wake(l);
    this.logs.clear();
    this.claims.clear();
  }
}

function wake(l: Log): void {
  const w = l.waiters;
  l.waiters = [];
  for (const f of w) f();
}
