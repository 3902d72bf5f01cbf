/**
 * The store's side of shared flights (state/flights/shared-flights.ts has the protocol): the log's entries,
 * the driver each store offers (memory table: flight-table.ts; Redis: redis-flights.ts), the
 * timings, and the failure entries.
 */
import { GatewayError } from '../../errors/gateway-error.ts';
import { ERRORS, type ErrorCode } from '../../errors/codes.ts';

export type FlightEntryKind = 'h' | 'p' | 'j' | 'e' | 'x';
export interface FlightEntry {
  k: FlightEntryKind;
  v: string;
}

export interface AppendOptions {
  endLingerMs?: number | undefined;
  /** with `cacheText`: the cache entry stored under the flight's key for this long */
  cacheMs?: number | undefined;
  cacheText?: string | undefined;
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
  /** A new flight's id (default: random); a driver may make it name the process that leads it. */
  newId?(): string;
  /** Claims `key` for flight `id` (live from now) unless a claim exists; the id of the flight holding it. */
  claim(key: string, id: string, ttlMs: number): Promise<string>;
  /**
   * The store's cached entry under `key` (a flight's key is its cache key) or, when there is none,
   * `claim`'s answer: a cache lookup and its claim in one store operation. Only drivers that see
   * the cache have it; they also store the cache entry `append` is given.
   */
  lookup?(key: string, id: string, ttlMs: number): Promise<FlightLookup>;
  /** Keeps the flight live (and its claim while it is `id`'s); the attached followers, or -1 when it is not live. */
  refresh(key: string, id: string, ttlMs: number): Promise<number>;
  /**
   * Appends `entries`; with `o.cacheMs` and `o.cacheText` (drivers with `lookup`), also stores
   * `key`'s cache entry for that long; with `o.endLingerMs`, then ends the flight as `release` does.
   * All in one store operation; false when `o.alone` and a follower is attached (then nothing was
   * done, the cache entry included).
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
/** A driver that cannot wait for a follower to attach (Redis without its subscription) is asked this often while a stream runs. */
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

export const failure = (code: string, message: string): FlightEntry => ({ k: 'x', v: JSON.stringify({ code, message }) });
export const LOST = failure('upstream_connection_lost', 'The shared upstream call ended without its end: the gateway process serving it went away.');
