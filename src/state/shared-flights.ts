/**
 * Request coalescing across processes (cluster workers on the primary's memory store, replicas on
 * one Redis): the first process to see a cache key in flight claims it and becomes the leader;
 * the others follow its flight instead of calling upstream.
 *
 * A flight is a claim (the flight's id under the cache key: new requests for the key follow it), its
 * liveness (both with a TTL the leader refreshes while its call runs) and an append-only log of
 * entries under that id:
 *   h  stream head: the commit point passed, `{"backend","model"}` of who serves it
 *   p  one stream part, as the StreamTap and the cache hold it
 *   j  a JSON answer, as the cache holds it (the whole entry)
 *   e  the stream ended cleanly
 *   x  failure `{"code","message"}`: before `h`/`j` followers make their own call (they are
 *      before the commit point); after `h` their streams end with that error
 * Followers attach (register) while they read: a leader whose own clients all left keeps its
 * upstream call going while any follower is attached. A flight whose liveness expires without
 * `e`/`x`/`j` (the leader's process died) is a failure too, seen within the TTL. The log outlives
 * the flight by LINGER_MS, so a follower that is behind still reads the end.
 *
 * A stream's leader publishes nothing until a follower is attached (almost always none is: most
 * misses are nobody else's): from its head on it holds its entries back and watches for one
 * (`watch`: the memory table answers when one attaches, Redis is polled every WATCH_POLL_MS); at
 * the first it publishes all it held, then every entry as it comes. Its release is conditional
 * (`alone`): when a follower attached since the last watch, the release does nothing and the
 * leader publishes everything, then releases. So a stream nobody follows writes no entry at all.
 *
 * A stream whose log passes `maxBytes` (cache.max_entry_bytes) takes no new followers, as the
 * in-process tap does: the leader lets the claim go (new requests make their own call) and goes on
 * publishing every part to the followers already attached, until the end. So a store can hold one
 * answer's whole size per such flight, while followers are attached (then LINGER_MS more): once a
 * refresh a full refresh interval after the claim went finds none attached, the leader publishes
 * `x` and stops (a follower attaching that late gets the error, never a cut answer). A JSON answer
 * past the bound is published as `x` (followers make their own call).
 *
 * Round trips: a cache miss looks the cache up and claims in one operation (`lookup`, on drivers
 * that see the cache); the leader's entries are written once per event-loop turn, so a JSON
 * answer, its cache entry and the release are one operation too, and a stream's head goes with the
 * parts read in its turn.
 */
import { GatewayError } from '../errors/gateway-error.ts';
import { ERRORS, type ErrorCode } from '../errors/codes.ts';
import { randomHex } from '../lib/random-id.ts';

export type FlightEntryKind = 'h' | 'p' | 'j' | 'e' | 'x';
export interface FlightEntry {
  k: FlightEntryKind;
  v: string;
}

export interface AppendOptions {
  endLingerMs?: number | undefined;
  cacheMs?: number | undefined;
  /** only while no follower is attached: otherwise nothing is done (`append` answers false) */
  alone?: boolean | undefined;
}

/** A driver's lookup: the cached entry's text, or the id of the flight holding the claim. */
export type FlightLookup = { entry: string; holder?: undefined } | { holder: string; entry?: undefined };

export interface FlightRead {
  entries: FlightEntry[];
  /** where the next read starts */
  cursor: string;
  /** false: nothing new and the flight is no longer live (ended, failed or its leader gone) */
  held: boolean;
}

/** What a store offers for shared flights (memory table: flight-table.ts; Redis: redis-flights.ts). */
export interface FlightDriver {
  /** Claims `key` for flight `id` (live from now) unless a claim exists; the id of the flight holding it. */
  claim(key: string, id: string, ttlMs: number): Promise<string>;
  /**
   * The store's cached entry under `key` (a flight's key is its cache key) or, when there is none,
   * `claim`'s answer: a cache lookup and its claim in one store operation. Only drivers that see
   * the cache have it; they also store a JSON answer as the cache entry when `append` is told to.
   */
  lookup?(key: string, id: string, ttlMs: number): Promise<FlightLookup>;
  /** Keeps the flight live (and its claim while it is `id`'s); the attached followers, or -1 when it is not live. */
  refresh(key: string, id: string, ttlMs: number): Promise<number>;
  /**
   * Appends `entries`; with `o.cacheMs` (drivers with `lookup`), a `j` entry among them is also
   * stored as `key`'s cache entry for that long; with `o.endLingerMs`, then ends the flight as
   * `release` does. All in one store operation; false when `o.alone` and a follower is attached
   * (then nothing was done).
   */
  append(key: string, id: string, entries: FlightEntry[], ttlMs: number, o?: AppendOptions): Promise<boolean>;
  /**
   * The attached followers, answered as soon as there is one, else 0 after up to `waitMs` (a driver
   * that cannot wait answers sooner: the caller asks again); -1 when the flight is not live.
   */
  watch(key: string, id: string, waitMs: number): Promise<number>;
  /** Lets the claim go (if still `id`'s): no new followers; the flight stays live for the attached ones. */
  unclaim(key: string, id: string): Promise<void>;
  /** Ends the flight and lets the claim go (if still `id`'s); the log stays readable for `lingerMs`. */
  release(key: string, id: string, lingerMs: number): Promise<void>;
  attach(key: string, id: string, follower: string, ttlMs: number): Promise<void>;
  detach(key: string, id: string, follower: string): Promise<void>;
  /** Entries after `cursor` ('' = from the start), waiting up to `waitMs` for one. */
  read(key: string, id: string, cursor: string, waitMs: number): Promise<FlightRead>;
  close(): void;
}

/** A claim and a flight's liveness last this long without a refresh (a dead leader is noticed within it). */
export const FLIGHT_TTL_MS = 5000;
/** A follower's read waits this long before checking the claim. */
export const READ_WAIT_MS = 1000;
/** A finished flight's log stays readable this long for followers that are behind. */
export const LINGER_MS = 10_000;
/** A driver that cannot wait for a follower to attach (Redis) is asked this often while a stream runs. */
export const WATCH_POLL_MS = 75;

/** What a failure entry becomes for a follower: the error a local follower would see. */
export function flightError(v: string): GatewayError {
  try {
    const { code, message } = JSON.parse(v) as { code?: string; message?: string };
    const kind: ErrorCode = code !== undefined && code in ERRORS ? (code as ErrorCode) : 'upstream_stream_error';
    return new GatewayError(kind, message);
  } catch {
    return new GatewayError('upstream_stream_error');
  }
}

const failure = (code: string, message: string): FlightEntry => ({ k: 'x', v: JSON.stringify({ code, message }) });
const LOST = failure('upstream_connection_lost', 'The shared upstream call ended without its end: the gateway process serving it went away.');

export type Claim = { lead: FlightLead; follow?: undefined } | { follow: FlightFollow; lead?: undefined };
/** A cache lookup with its claim: the cached entry's text, or (a miss) the claim. */
export type Lookup = { entry: string; lead?: undefined; follow?: undefined } | (Claim & { entry?: undefined });

export class SharedFlights {
  constructor(
    private readonly d: FlightDriver,
    private readonly ttlMs = FLIGHT_TTL_MS,
  ) {}

  /** Leader or follower of `key`'s flight; undefined when the shared state cannot be reached. */
  async claim(key: string, maxBytes: number): Promise<Claim | undefined> {
    const id = randomHex(12);
    let holder: string;
    try {
      holder = await this.d.claim(key, id, this.ttlMs);
    } catch {
      return undefined;
    }
    return this.made(key, id, holder, maxBytes);
  }

  /**
   * The cached entry under `key`, or else `claim`'s answer, in one store operation; undefined when
   * the driver cannot (look the cache up, then claim), null when the shared state cannot be reached.
   */
  async lookup(key: string, maxBytes: number): Promise<Lookup | null | undefined> {
    if (!this.d.lookup) return undefined;
    const id = randomHex(12);
    let r: FlightLookup;
    try {
      r = await this.d.lookup(key, id, this.ttlMs);
    } catch {
      return null;
    }
    return r.entry !== undefined ? { entry: r.entry } : this.made(key, id, r.holder, maxBytes);
  }

  private made(key: string, id: string, holder: string, maxBytes: number): Claim {
    if (holder === id) return { lead: new FlightLead(this.d, key, id, this.ttlMs, maxBytes) };
    return { follow: new FlightFollow(this.d, key, holder, this.ttlMs) };
  }

  close(): void {
    this.d.close();
  }
}

/**
 * The leader's side: publishes entries in order (batched while a write is out) and keeps the claim;
 * a stream's entries only once a follower is attached.
 */
export class FlightLead {
  /** Told the number of attached followers on every refresh (and when the first is seen). */
  onFollowers: ((n: number) => void) | undefined;
  private queue: FlightEntry[] = [];
  /** a stream's entries from its head on, held back while no follower has been seen */
  private held: FlightEntry[] | undefined;
  private sending = false;
  private scheduled = false;
  /** the JSON answer is also the cache entry, kept this long (stored with its publication) */
  private cacheMs: number | undefined;
  private closed = false;
  private released = false;
  private bytes = 0;
  /** past the bound: refreshes since the claim was let go (-1: not let go, or not yet) */
  private unclaimed = -1;
  private shut = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly d: FlightDriver,
    readonly key: string,
    readonly id: string,
    private readonly ttlMs: number,
    private readonly maxBytes: number,
  ) {
    this.timer = setInterval(() => void this.tick(), Math.max(50, Math.floor(ttlMs / 3)));
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.closed) return;
    if (this.unclaimed >= 0) this.unclaimed++;
    // a follower that took the claim just before it went attaches right after: give it an interval
    const alone = this.unclaimed >= 2;
    let n: number;
    try {
      n = await this.d.refresh(this.key, this.id, this.ttlMs);
    } catch {
      this.onFollowers?.(0);
      return;
    }
    this.onFollowers?.(Math.max(0, n));
    if (n > 0 && !this.closed) this.publish();
    if (alone && n === 0 && !this.closed) {
      this.put(failure('upstream_response_too_large', 'The shared stream grew beyond cache.max_entry_bytes; ask again without coalescing.'));
      this.close();
    }
  }

  /** Refreshes the claim; the followers attached now (0 when it cannot tell). */
  async followers(): Promise<number> {
    if (this.closed) return 0;
    try {
      return Math.max(0, await this.d.refresh(this.key, this.id, this.ttlMs));
    } catch {
      return 0;
    }
  }

  /** The stream's head: it and what follows are published once a follower is attached. */
  head(backend: string, model: string): void {
    if (this.closed || this.held) return;
    this.held = [];
    this.put({ k: 'h', v: JSON.stringify({ backend, model }) });
    void this.watch();
  }

  /** Waits for a follower while the stream's entries are held back (one store operation at a time). */
  private async watch(): Promise<void> {
    while (this.held && !this.closed) {
      let n: number;
      try {
        n = await this.d.watch(this.key, this.id, READ_WAIT_MS);
      } catch {
        // the refreshes still see followers
        return;
      }
      if (n < 0 || this.closed) return;
      if (n > 0) {
        this.onFollowers?.(n);
        return this.publish();
      }
    }
  }

  /** A follower is attached: what was held back goes out, and from now on every entry as it comes. */
  private publish(): void {
    const held = this.held;
    if (!held || this.released) return;
    this.held = undefined;
    this.queue = this.queue.concat(held);
    this.schedule();
  }

  /** One stream part's log text (past the bound: for the followers attached, no new ones). */
  part(text: string): void {
    if (this.closed) return;
    this.bytes += text.length;
    if (this.bytes > this.maxBytes && !this.shut) {
      this.shut = true;
      void this.d
        .unclaim(this.key, this.id)
        .catch(() => {})
        .then(() => void (this.unclaimed = 0));
    }
    this.put({ k: 'p', v: text });
  }

  /** Whether the store keeps the JSON answer as the cache entry too, when told to (`json`'s `cacheMs`). */
  get storesAnswers(): boolean {
    return this.d.lookup !== undefined;
  }

  /**
   * A JSON answer's cache entry text (too large: followers make their own call); with `cacheMs`
   * (`storesAnswers`), the store keeps it as the cache entry that long, in the same operation.
   */
  json(text: string, cacheMs?: number): void {
    if (text.length > this.maxBytes) return this.put(failure('upstream_response_too_large', 'too large to share'));
    this.cacheMs = cacheMs;
    this.put({ k: 'j', v: text });
  }

  end(): void {
    this.put({ k: 'e', v: '' });
  }

  fail(err: unknown): void {
    const code = err instanceof GatewayError ? err.kind : 'upstream_stream_error';
    this.put(failure(code, err instanceof Error ? err.message : 'The upstream call failed.'));
  }

  /** No more entries: the claim is let go once what is queued is written. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    this.onFollowers?.(0);
    this.schedule();
  }

  private put(e: FlightEntry): void {
    if (this.closed) return;
    if (this.held) return void this.held.push(e);
    this.queue.push(e);
    this.schedule();
  }

  /**
   * Writes once this turn of the event loop is done: what is put in it (a stream's head and the
   * parts read with it; a JSON answer and the close) travels in one store operation.
   */
  private schedule(): void {
    if (this.scheduled || this.sending) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.sending) return;
    this.sending = true;
    while (this.queue.length > 0 || (this.closed && !this.released)) {
      const batch = this.queue;
      this.queue = [];
      // nothing is put once closed: this batch is the last, and the release goes with it
      const last = this.closed;
      if (last) this.released = true;
      // a stream nobody has followed ends unpublished, unless a follower attached since the last watch
      const alone = last && this.held !== undefined ? true : undefined;
      // a lost write shows as a claim without its end: followers fail instead of hanging
      const cacheMs = this.cacheMs;
      this.cacheMs = undefined;
      const done = await this.d
        .append(this.key, this.id, batch, this.ttlMs + LINGER_MS, { endLingerMs: last ? LINGER_MS : undefined, cacheMs, alone })
        .catch(() => true);
      if (!done) {
        // the release did nothing: everything held goes out with it instead
        this.released = false;
        this.publish();
      }
    }
    this.sending = false;
  }
}

/** Where a follower's stream goes: the parts' texts, then the end or the error. */
export interface FlightSink {
  pushText(text: string): void;
  finish(err?: unknown): void;
}

/** A follower's side: attached while it reads; `close` stops reading and detaches. */
export class FlightFollow {
  private cursor = '';
  private closed = false;
  private detached = false;
  private readonly me = randomHex(8);
  private readonly attached: Promise<void>;

  constructor(
    private readonly d: FlightDriver,
    readonly key: string,
    readonly id: string,
    ttlMs: number,
  ) {
    this.attached = d.attach(key, id, this.me, ttlMs + LINGER_MS).catch(() => {});
  }

  /** The JSON answer's entry text; undefined when the leader failed or went away (call yourself). */
  async json(signal: AbortSignal | { aborted: boolean }): Promise<string | undefined> {
    try {
      for (;;) {
        const batch = await this.next(signal);
        if (batch === undefined) return undefined;
        for (const e of batch) {
          if (e.k === 'j') return e.v;
          if (e.k === 'x') return undefined;
        }
      }
    } finally {
      this.close();
    }
  }

  /**
   * Streams: resolves at the head with who serves it (undefined when the leader failed or went
   * away before it: call yourself), then feeds the parts into `sink` as they come, until the end.
   */
  async stream(signal: { aborted: boolean }, sink: FlightSink): Promise<{ backend: string; model: string } | undefined> {
    let rest: FlightEntry[] = [];
    let head: { backend: string; model: string } | undefined;
    while (head === undefined) {
      const batch = await this.next(signal);
      const i = batch?.findIndex((e) => e.k === 'h' || e.k === 'x') ?? -1;
      const e = batch?.[i];
      if (batch === undefined || e === undefined) {
        if (batch === undefined || batch.some((x) => x.k === 'j' || x.k === 'e')) {
          this.close();
          return undefined;
        }
        continue;
      }
      if (e.k === 'x') {
        this.close();
        return undefined;
      }
      head = JSON.parse(e.v) as { backend: string; model: string };
      rest = batch.slice(i + 1);
    }
    void this.pump(signal, sink, rest);
    return head;
  }

  private async pump(signal: { aborted: boolean }, sink: FlightSink, first: FlightEntry[]): Promise<void> {
    let batch: FlightEntry[] | undefined = first;
    try {
      for (;;) {
        for (const e of batch ?? [LOST]) {
          if (e.k === 'p') sink.pushText(e.v);
          else if (e.k === 'e') return sink.finish();
          else if (e.k === 'x') return sink.finish(flightError(e.v));
        }
        if (this.closed) return;
        batch = await this.next(signal);
        if (batch === undefined && this.closed) return;
      }
    } finally {
      this.close();
    }
  }

  /** The next entries (possibly none yet); undefined when closed or the flight is gone without an end. */
  private async next(signal: { aborted: boolean }): Promise<FlightEntry[] | undefined> {
    await this.attached;
    if (this.closed || signal.aborted) {
      this.closed = true;
      return undefined;
    }
    let r: FlightRead;
    try {
      r = await this.d.read(this.key, this.id, this.cursor, READ_WAIT_MS);
    } catch {
      return undefined;
    }
    this.cursor = r.cursor;
    if (r.entries.length === 0 && !r.held) return undefined;
    return r.entries;
  }

  /** Stops reading and detaches (the leader may then stop when nobody else listens). */
  close(): void {
    this.closed = true;
    if (this.detached) return;
    this.detached = true;
    void this.attached.then(() => this.d.detach(this.key, this.id, this.me)).catch(() => {});
  }
}
