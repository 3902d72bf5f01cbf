/**
 * Request coalescing: identical cacheable requests in flight at the same moment (same cache key,
 * so the same namespace: tenants are never mixed) share one upstream call.
 *
 * A Flight owns the upstream call's abort signal. Every participant — the request that started it
 * and those that joined — holds a place; a participant whose client goes away gives its place back,
 * and the upstream call is aborted only when nobody is left. So a leader that disconnects does not
 * take the answer away from the followers.
 *
 * Streams go through a StreamTap: the upstream stream is read once (pumped) into a log of the
 * chunks' texts; every subscriber replays the log from the start and then follows it live, so a
 * late joiner gets the chunks so far, then the rest. The same log becomes the cache entry.
 *
 * When the store is shared by several processes (state/flights/shared-flights.ts), a flight is also
 * claimed in the store and its outcome published there, for followers in other processes; while
 * any of them is attached it holds a place, so the leader's call goes on without local clients
 * (docs/design/coalescing.md).
 */
import type { AbortLike } from '../lib/abort.ts';
import type { FlightLead, SharedFlights } from '../state/flights/shared-flights.ts';
import { detached } from '../protocol/chat/event-text.ts';
import { ChunkPart, EventPart, PlainHead, type StreamPart } from '../protocol/stream-part.ts';

export class Flight<R> {
  private readonly controller = new AbortController();
  private participants = 0;
  private settled = false;
  private lead: FlightLead | undefined;
  /** the place remote followers hold, while any is attached */
  private remote: (() => void) | undefined;
  /** The shared outcome (set by the leader right after creating the flight). */
  result!: Promise<R>;
  /** Streams: the chunk log. */
  tap: StreamTap | undefined;

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Whether a new request may still join (not aborted, not finished). */
  get joinable(): boolean {
    return !this.settled && !this.controller.signal.aborted;
  }

  /** Takes a place until the returned function is called or `signal` aborts. */
  join(signal: AbortLike): () => void {
    this.participants++;
    let left = false;
    const leave = (): void => {
      if (left) return;
      left = true;
      signal.removeEventListener('abort', leave);
      if (--this.participants === 0 && !this.settled) this.lastLeft();
    };
    if (signal.aborted) queueMicrotask(leave);
    else signal.addEventListener('abort', leave, { once: true });
    return leave;
  }

  /** The upstream call is over: leaving no longer aborts anything. */
  settle(): void {
    this.settled = true;
  }

  /** Published for other processes: their attached followers keep the call going too. */
  share(lead: FlightLead): void {
    this.lead = lead;
    lead.onFollowers = (n) => this.remoteFollowers(n);
  }

  private remoteFollowers(n: number): void {
    if (n > 0 && !this.remote && !this.settled) this.remote = this.join(NEVER);
    else if (n === 0 && this.remote) {
      const leave = this.remote;
      this.remote = undefined;
      leave();
    }
  }

  private lastLeft(): void {
    const abort = (): void => {
      if (this.participants === 0 && !this.settled) this.controller.abort(new Error('every client of this request went away'));
    };
    if (!this.lead) return abort();
    void this.lead.followers().then((n) => {
      this.remoteFollowers(n);
      abort();
    }, abort);
  }
}

/** A signal that never aborts: the place remote followers hold is given back explicitly. */
const NEVER = new AbortController().signal;

export class Flights {
  private readonly map = new Map<string, Flight<unknown>>();

  constructor(
    private readonly coalesce: boolean,
    /** Coalescing across processes, when the store is shared (and coalescing is on). */
    readonly shared?: SharedFlights,
  ) {}

  /** A flight with this key that can still be joined. */
  find<R>(key: string): Flight<R> | undefined {
    const f = this.map.get(key);
    if (f && !f.joinable) {
      this.map.delete(key);
      return undefined;
    }
    return f as Flight<R> | undefined;
  }

  /** A new flight, findable by others when coalescing is on (and published by `lead`). */
  start<R>(key: string, lead?: FlightLead): Flight<R> {
    const f = new Flight<R>();
    if (lead) f.share(lead);
    if (this.coalesce) this.map.set(key, f as Flight<unknown>);
    return f;
  }

  /** No more joiners for this flight. */
  end(key: string, f: Flight<unknown>): void {
    if (this.map.get(key) === f) this.map.delete(key);
  }

  get size(): number {
    return this.map.size;
  }
}

/**
 * An append-only log of a stream's parts as texts, with any number of readers, each reading its
 * own parts: a chunk as its JSON object text, a forwarded event as the JSON array
 * `[event, data, content, final]` (the two kinds never share a log: one stream has one kind).
 */
export class StreamTap {
  readonly chunks: string[] = [];
  bytes = 0;
  private done = false;
  private error: unknown;
  private waiters: Array<() => void> = [];

  /** Appends a part; its log text. */
  push(part: StreamPart): string {
    // held for the flight's followers and then by the cache: a copy, not a view into the upstream's read
    const s = part.kind === 'chunk' ? detached(part.json()) : JSON.stringify([part.event, part.data, part.content, part.final]);
    this.pushText(s);
    return s;
  }

  /** Appends a part's log text (a shared flight's, read from the store). */
  pushText(s: string): void {
    this.chunks.push(s);
    this.bytes += s.length;
    this.wake();
  }

  finish(err?: unknown): void {
    this.done = true;
    this.error = err;
    this.wake();
  }

  get finished(): boolean {
    return this.done;
  }

  get failed(): boolean {
    return this.done && this.error !== undefined;
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /**
   * Every chunk from the first, then live ones, as parts of their own (a plain text is not
   * parsed); ends (or throws) as the source did.
   */
  subscribe<C extends object>(onClose: () => void): AsyncIterable<ChunkPart<C>> {
    const head = new PlainHead();
    return this.reader(onClose, (s) => ChunkPart.fromText<C>(s, head));
  }

  /** As subscribe, for a log of forwarded events. */
  subscribeEvents(onClose: () => void): AsyncIterable<EventPart> {
    return this.reader(onClose, eventFromLog);
  }

  private reader<P>(onClose: () => void, make: (text: string) => P): AsyncIterable<P> {
    let i = 0;
    let closed = false;
    const close = (): void => {
      if (closed) return;
      closed = true;
      onClose();
      this.wake();
    };
    const next = (): Promise<IteratorResult<P>> => {
      if (closed) return Promise.resolve({ done: true, value: undefined });
      const s = this.chunks[i];
      if (s !== undefined) {
        i++;
        return Promise.resolve({ done: false, value: make(s) });
      }
      if (this.done) {
        close();
        return this.error !== undefined ? Promise.reject(this.error) : Promise.resolve({ done: true, value: undefined });
      }
      return new Promise<void>((r) => this.waiters.push(r)).then(next);
    };
    return {
      [Symbol.asyncIterator]: () => ({
        next,
        return: async (): Promise<IteratorResult<P>> => {
          close();
          return { done: true, value: undefined };
        },
      }),
    };
  }
}

/** A forwarded event as the log (and a cached stream) holds it: `[event, data, content, final]`. */
export function eventFromLog(entry: unknown): EventPart {
  const [event, data, content, final] = (typeof entry === 'string' ? JSON.parse(entry) : entry) as [string, string, boolean, boolean];
  return new EventPart(event, data, content, final);
}
