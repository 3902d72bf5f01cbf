/**
 * Shared flights in one process's memory: the cluster primary holds one table for all its
 * workers (they reach it over IPC, state/store/ipc.ts). Claims and flights' liveness expire by the clock
 * as Redis keys do; a read waits (long poll) until an entry arrives, the flight ends or `waitMs`
 * passes, and a leader's watch until a follower attaches. A claim may carry a notice to send when
 * a follower attaches instead (over IPC the primary calls the leader's worker, so the leader waits
 * without asking). Logs of leaders that went away are dropped once their TTL has passed without an
 * append or refresh. Expired claims and logs are read as absent at once and swept out at most once per
 * SWEEP_MS: a finished flight's log lingers, so a sweep on every claim would walk every flight of
 * the last LINGER_MS.
 */
import type { AppendOptions, FlightDriver, FlightEntry, FlightRead } from './shared-flights.ts';

interface Log {
  entries: FlightEntry[];
  followers: Set<string>;
  /** the flight is live until this (epoch ms; 0: ended) */
  live: number;
  /** dropped after this (epoch ms) */
  until: number;
  waiters: Array<() => void>;
  /** leaders waiting for a follower to attach */
  watchers: Array<() => void>;
  /** told the flight's id when a follower attaches (the claim's `followed`) */
  followed: ((id: string) => void) | undefined;
}

const SWEEP_MS = 1000;

export class FlightTable implements FlightDriver {
  private readonly claims = new Map<string, { id: string; until: number }>();
  private readonly logs = new Map<string, Log>();
  private nextSweep = 0;

  constructor(private readonly now: () => number = Date.now) {}

  private log(key: string, id: string): Log | undefined {
    const l = this.logs.get(`${key}\n${id}`);
    return l && l.until > this.now() ? l : undefined;
  }

  private live(key: string, id: string): boolean {
    const l = this.log(key, id);
    return l !== undefined && l.live > this.now();
  }

  private sweep(force = false): void {
    const now = this.now();
    if (!force && now < this.nextSweep) return;
    this.nextSweep = now + SWEEP_MS;
    for (const [k, c] of this.claims) if (c.until <= now) this.claims.delete(k);
    for (const [k, l] of this.logs) {
      if (l.until > now) continue;
      this.logs.delete(k);
      wake(l);
      wakeWatchers(l);
    }
  }

  /** As the driver's; `followed` (when this claim leads) is told `id` each time a follower attaches. */
  async claim(key: string, id: string, ttlMs: number, followed?: (id: string) => void): Promise<string> {
    this.sweep();
    const c = this.claims.get(key);
    if (c && c.until > this.now()) return c.id;
    const until = this.now() + ttlMs;
    this.claims.set(key, { id, until });
    this.logs.set(`${key}\n${id}`, { entries: [], followers: new Set(), live: until, until, waiters: [], watchers: [], followed });
    return id;
  }

  async refresh(key: string, id: string, ttlMs: number): Promise<number> {
    const l = this.log(key, id);
    if (!l || l.live <= this.now()) return -1;
    l.live = this.now() + ttlMs;
    l.until = Math.max(l.until, l.live);
    const c = this.claims.get(key);
    if (c?.id === id && c.until > this.now()) c.until = l.live;
    return l.followers.size;
  }

  /** Keeps no cache (the primary's store does, state/store/ipc.ts): `o.cacheMs` is the caller's to honour. */
  async append(key: string, id: string, entries: FlightEntry[], ttlMs: number, o?: AppendOptions): Promise<boolean> {
    const l = this.log(key, id);
    if (o?.alone && l && l.followers.size > 0) return false;
    if (l) {
      for (const e of entries) l.entries.push(e);
      l.until = Math.max(l.until, this.now() + ttlMs);
      wake(l);
    }
    if (o?.endLingerMs !== undefined) await this.release(key, id, o.endLingerMs);
    return true;
  }

  async unclaim(key: string, id: string): Promise<void> {
    if (this.claims.get(key)?.id === id) this.claims.delete(key);
  }

  async release(key: string, id: string, lingerMs: number): Promise<void> {
    if (this.claims.get(key)?.id === id) this.claims.delete(key);
    const l = this.log(key, id);
    if (!l) return;
    l.live = 0;
    l.until = this.now() + lingerMs;
    wake(l);
    wakeWatchers(l);
  }

  async attach(key: string, id: string, follower: string): Promise<void> {
    const l = this.log(key, id);
    if (!l) return;
    l.followers.add(follower);
    wakeWatchers(l);
    l.followed?.(id);
  }

  async watch(key: string, id: string, waitMs: number): Promise<number> {
    const l = this.log(key, id);
    if (!l || l.live <= this.now()) return -1;
    if (l.followers.size === 0) await parked(l.watchers, waitMs);
    return this.live(key, id) ? l.followers.size : -1;
  }

  async detach(key: string, id: string, follower: string): Promise<void> {
    this.log(key, id)?.followers.delete(follower);
  }

  async read(key: string, id: string, cursor: string, waitMs: number): Promise<FlightRead> {
    const from = cursor === '' ? 0 : Number(cursor);
    const l = this.log(key, id);
    if (l && l.entries.length <= from && l.live > this.now()) await parked(l.waiters, waitMs);
    const entries = this.log(key, id)?.entries.slice(from) ?? [];
    return { entries, cursor: String(from + entries.length), held: this.live(key, id) };
  }

  /** Flights whose logs are held now (for tests and /status). */
  get size(): number {
    this.sweep(true);
    return this.logs.size;
  }

  close(): void {
    for (const l of this.logs.values()) {
      wake(l);
      wakeWatchers(l);
    }
    this.logs.clear();
    this.claims.clear();
  }
}

/** Resolves when woken through `list` or after `waitMs`. */
function parked(list: Array<() => void>, waitMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(done, waitMs);
    function done(): void {
      clearTimeout(timer);
      resolve();
    }
    list.push(done);
  });
}

function wakeWatchers(l: Log): void {
  const w = l.watchers;
  l.watchers = [];
  for (const f of w) f();
}

function wake(l: Log): void {
  const w = l.waiters;
  l.waiters = [];
  for (const f of w) f();
}
