/**
 * The memory store shared by cluster workers (server.workers > 1, state.store: memory): the
 * primary holds one MemoryStore and each worker's IpcStore sends every operation to it and awaits
 * the answer, so a limit of N admits N across all workers and an answer cached by one worker is a
 * hit on every other. Operations run one at a time in the primary's event loop, in the order they
 * arrive — the same atomicity the memory store has in one process. The transport (the IPC channel
 * node:cluster opens) is the caller's: `call` sends one operation and resolves with its result.
 */
import type { LeaderNotices } from '../flights/flight-notices.ts';
import type { FlightTable } from '../flights/flight-table.ts';
import type { MemoryStore } from './memory.ts';
import { SharedFlights, type AppendOptions, type FlightDriver, type FlightEntry, type FlightLookup, type FlightRead } from '../flights/shared-flights.ts';
import type { HealthOp, HealthSettings, HealthView } from '../health/shared-health.ts';
import type { AdmitRequest, AdmitResult, StateStore, StoreStatus, Ticket } from './contract.ts';

/** One store operation as it travels to the primary. */
export type StateOp =
  | { op: 'admit'; r: AdmitRequest }
  | { op: 'settle'; t: Ticket; delta: number; spend: { period: string; nano: number; ttlMs: number } | undefined }
  | { op: 'release'; t: Ticket }
  | { op: 'refresh'; tickets: readonly Ticket[] }
  | { op: 'cacheGet'; key: string }
  | { op: 'cacheSet'; key: string; value: string; ttlMs: number }
  | { op: 'blobGet'; key: string }
  | { op: 'blobSet'; key: string; value: string; ttlMs: number }
  | { op: 'blobDelete'; key: string }
  | { op: 'blobLimit'; maxBytes: number }
  | { op: 'health'; ops: HealthOp[]; settings: HealthSettings }
  | { op: 'flight'; f: FlightOp };

/** One shared-flight operation (state/flights/shared-flights.ts), run on the primary's FlightTable. */
export type FlightOp =
  | { m: 'claim'; key: string; id: string; ttlMs: number }
  | { m: 'lookup'; key: string; id: string; ttlMs: number }
  | { m: 'refresh'; key: string; id: string; ttlMs: number }
  | { m: 'append'; key: string; id: string; entries: FlightEntry[]; ttlMs: number; o?: AppendOptions | undefined }
  | { m: 'unclaim'; key: string; id: string }
  | { m: 'release'; key: string; id: string; lingerMs: number }
  | { m: 'attach'; key: string; id: string; follower: string; ttlMs: number }
  | { m: 'detach'; key: string; id: string; follower: string }
  | { m: 'read'; key: string; id: string; cursor: string; waitMs: number }
  | { m: 'watch'; key: string; id: string; waitMs: number };

/** The answer: the operation's result and the number of cached entries held now (for /status). */
export interface StateAnswer {
  value: unknown;
  entries: number;
}

/** Primary side: runs one operation on the shared store (flights: on the primary's flight table). */
export async function serveStateOp(store: MemoryStore, o: StateOp, flights?: FlightTable, followed?: Followed): Promise<StateAnswer> {
  const value = await run(store, o, flights, followed);
  return { value, entries: store.cacheEntries() };
}

/** Tells the worker that sent an operation that a follower attached to flight `id` it leads. */
export type Followed = (id: string) => void;

/** The cached entry under `key` (the store's), else the claim: one operation for both. */
async function lookup(store: MemoryStore, t: FlightTable, f: { key: string; id: string; ttlMs: number }, followed: Followed | undefined): Promise<FlightLookup> {
  const entry = await store.cacheGet(f.key);
  return entry !== undefined ? { entry } : { holder: await t.claim(f.key, f.id, f.ttlMs, followed) };
}

/** Appends to the flight and, when done and given one, stores the cache entry. */
async function append(store: MemoryStore, t: FlightTable, f: Extract<FlightOp, { m: 'append' }>): Promise<boolean> {
  const o = f.o;
  if (!(await t.append(f.key, f.id, f.entries, f.ttlMs, o))) return false;
  if (o?.cacheMs !== undefined && o.cacheText !== undefined) await store.cacheSet(f.key, o.cacheText, o.cacheMs);
  return true;
}

function runFlight(store: MemoryStore, t: FlightTable, f: FlightOp, followed: Followed | undefined): Promise<unknown> {
  switch (f.m) {
    case 'claim':
      return t.claim(f.key, f.id, f.ttlMs, followed);
    case 'lookup':
      return lookup(store, t, f, followed);
    case 'refresh':
      return t.refresh(f.key, f.id, f.ttlMs);
    case 'append':
      return append(store, t, f);
    case 'unclaim':
      return t.unclaim(f.key, f.id);
    case 'release':
      return t.release(f.key, f.id, f.lingerMs);
    case 'attach':
      return t.attach(f.key, f.id, f.follower);
    case 'detach':
      return t.detach(f.key, f.id, f.follower);
    case 'read':
      return t.read(f.key, f.id, f.cursor, f.waitMs);
    case 'watch':
      return t.watch(f.key, f.id, f.waitMs);
    default: {
      const never: never = f;
      throw new Error(`unknown flight operation ${JSON.stringify(never)}`);
    }
  }
}

function run(store: MemoryStore, o: StateOp, flights: FlightTable | undefined, followed: Followed | undefined): Promise<unknown> | unknown {
  switch (o.op) {
    case 'flight':
      if (!flights) throw new Error('no shared flights here');
      return runFlight(store, flights, o.f, followed);
    case 'admit':
      return store.admitSync(o.r);
    case 'settle':
      return store.settle(o.t, o.delta, o.spend);
    case 'release':
      return store.release(o.t);
    case 'refresh':
      return store.refresh(o.tickets);
    case 'cacheGet':
      return store.cacheGet(o.key);
    case 'cacheSet':
      return store.cacheSet(o.key, o.value, o.ttlMs);
    case 'blobGet':
      return store.blobGet(o.key);
    case 'blobSet':
      return store.blobSet(o.key, o.value, o.ttlMs);
    case 'blobDelete':
      return store.blobDelete(o.key);
    case 'blobLimit':
      return store.blobLimit(o.maxBytes);
    case 'health':
      return store.healthSync(o.ops, o.settings);
    default: {
      const never: never = o;
      throw new Error(`unknown state operation ${JSON.stringify(never)}`);
    }
  }
}

/**
 * A worker's flight driver: each operation sent (`f`) to run on the primary's table and store.
 * With `notices` (the primary tells this worker when a follower attaches to a flight it leads:
 * serveStateOp's `followed`), a leader's watch waits on them and sends nothing.
 */
export function ipcFlightDriver(f: (op: FlightOp) => Promise<unknown>, notices?: LeaderNotices): FlightDriver {
  return {
    claim: async (key, id, ttlMs) => {
      const holder = (await f({ m: 'claim', key, id, ttlMs })) as string;
      return notices ? notices.claimed(id, holder) : holder;
    },
    refresh: async (key, id, ttlMs) => (await f({ m: 'refresh', key, id, ttlMs })) as number,
    lookup: async (key, id, ttlMs) => {
      const r = (await f({ m: 'lookup', key, id, ttlMs })) as FlightLookup;
      if (r.holder !== undefined) notices?.claimed(id, r.holder);
      return r;
    },
    append: async (key, id, entries, ttlMs, o) => {
      const op = f({ m: 'append', key, id, entries, ttlMs, o }) as Promise<boolean>;
      return notices ? notices.ending(id, o?.endLingerMs !== undefined, op, (done) => done) : op;
    },
    unclaim: async (key, id) => void (await f({ m: 'unclaim', key, id })),
    release: async (key, id, lingerMs) => {
      const op = f({ m: 'release', key, id, lingerMs });
      await (notices ? notices.ending(id, true, op) : op);
    },
    attach: async (key, id, follower, ttlMs) => void (await f({ m: 'attach', key, id, follower, ttlMs })),
    detach: async (key, id, follower) => void (await f({ m: 'detach', key, id, follower })),
    read: async (key, id, cursor, waitMs) => (await f({ m: 'read', key, id, cursor, waitMs })) as FlightRead,
    watch: async (key, id, waitMs) => (notices ? notices.wait(id, waitMs) : ((await f({ m: 'watch', key, id, waitMs })) as number)),
    // the notices outlive a generation's store (every generation of the worker shares them)
    close: () => {},
  };
}

/** Worker side: the StateStore whose state lives in the primary. */
export class IpcStore implements StateStore {
  readonly kind = 'memory' as const;
  /** Coalescing across workers: flights claimed and published in the primary's table. */
  readonly flights: SharedFlights;
  private entries = 0;

  /** `notices`: what the primary tells this worker of followers attaching to the flights it leads. */
  constructor(
    private readonly call: (o: StateOp) => Promise<unknown>,
    notices?: LeaderNotices,
  ) {
    this.flights = new SharedFlights(ipcFlightDriver((op) => this.ask({ op: 'flight', f: op }), notices));
  }

  private async ask(o: StateOp): Promise<unknown> {
    const a = (await this.call(o)) as StateAnswer;
    this.entries = a.entries;
    return a.value;
  }

  async admit(r: AdmitRequest): Promise<AdmitResult> {
    return (await this.ask({ op: 'admit', r })) as AdmitResult;
  }

  async settle(t: Ticket, delta: number, spend?: { period: string; nano: number; ttlMs: number }): Promise<void> {
    await this.ask({ op: 'settle', t, delta, spend });
  }

  async release(t: Ticket): Promise<void> {
    await this.ask({ op: 'release', t });
  }

  async refresh(tickets: readonly Ticket[]): Promise<void> {
    await this.ask({ op: 'refresh', tickets });
  }

  async cacheGet(key: string): Promise<string | undefined> {
    return (await this.ask({ op: 'cacheGet', key })) as string | undefined;
  }

  async cacheSet(key: string, value: string, ttlMs: number): Promise<void> {
    await this.ask({ op: 'cacheSet', key, value, ttlMs });
  }

  async blobGet(key: string): Promise<string | undefined> {
    return (await this.ask({ op: 'blobGet', key })) as string | undefined;
  }

  async blobSet(key: string, value: string, ttlMs: number): Promise<boolean> {
    return (await this.ask({ op: 'blobSet', key, value, ttlMs })) as boolean;
  }

  async blobDelete(key: string): Promise<boolean> {
    return (await this.ask({ op: 'blobDelete', key })) as boolean;
  }

  async health(ops: HealthOp[], settings: HealthSettings): Promise<HealthView[]> {
    return (await this.ask({ op: 'health', ops, settings })) as HealthView[];
  }

  blobLimit(maxBytes: number): void {
    this.ask({ op: 'blobLimit', maxBytes }).catch(() => {});
  }

  /** Cached entries in the primary's store as of the last answer. */
  cacheEntries(): number {
    return this.entries;
  }

  status(): StoreStatus {
    return { store: 'memory', state: 'ok' };
  }

  /** The primary owns the state: a worker's generation letting go of its handle clears nothing. */
  async close(): Promise<void> {}
}
