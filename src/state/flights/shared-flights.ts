/**
 * Request coalescing across processes (cluster workers on the primary's memory store, replicas on
 * one Redis): the first process to see a cache key in flight claims it and leads; the others follow
 * its flight's log instead of calling upstream. The leader publishes only once a follower attaches,
 * and releases the claim with the answer's cache entry. The protocol (claim, leader, follower,
 * release, linger, publish on attach, failures): docs/design/coalescing.md.
 */
import { GatewayError } from '../../errors/gateway-error.ts';
import { randomHex } from '../../lib/random-id.ts';
import { failure, FLIGHT_TTL_MS, LINGER_MS, READ_WAIT_MS, type FlightDriver, type FlightEntry, type FlightLookup } from './flight-driver.ts';
import { FlightFollow } from './flight-follow.ts';

export * from './flight-driver.ts';
export { FlightFollow, type FlightSink } from './flight-follow.ts';

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
    const id = this.d.newId?.() ?? randomHex(12);
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
    const id = this.d.newId?.() ?? randomHex(12);
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
  /** the cache entry, kept this long, stored with the next write */
  private cacheMs: number | undefined;
  private cacheText: string | undefined;
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

  /** Whether the store keeps the answer's cache entry with the release, when told to (`cache`). */
  get storesAnswers(): boolean {
    return this.d.lookup !== undefined;
  }

  /**
   * A JSON answer's cache entry text (too large: followers make their own call), published only
   * when the release finds a follower attached.
   */
  json(text: string): void {
    if (text.length > this.maxBytes) return this.put(failure('upstream_response_too_large', 'too large to share'));
    this.held ??= [];
    this.put({ k: 'j', v: text });
  }

  /** The answer's cache entry (`storesAnswers`): stored for `ms` with the release, in the same operation. */
  cache(text: string, ms: number): void {
    if (this.closed) return;
    this.cacheText = text;
    this.cacheMs = ms;
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
      // a flight nobody has followed ends unpublished, unless a follower attached since the last watch
      const alone = last && this.held !== undefined ? true : undefined;
      // a lost write shows as a claim without its end: followers fail instead of hanging
      const { cacheMs, cacheText } = this;
      this.cacheMs = this.cacheText = undefined;
      const done = await this.d
        .append(this.key, this.id, batch, this.ttlMs + LINGER_MS, { endLingerMs: last ? LINGER_MS : undefined, cacheMs, cacheText, alone })
        .catch(() => true);
      if (!done) {
        // the release did nothing (the cache entry neither): everything held goes out with them instead
        this.released = false;
        this.cacheMs = cacheMs;
        this.cacheText = cacheText;
        this.publish();
      }
    }
    this.sending = false;
  }
}
