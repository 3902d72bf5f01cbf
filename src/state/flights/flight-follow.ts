/**
 * A follower's side of a shared flight (state/flights/shared-flights.ts has the protocol): reads the
 * leader's log from its start, then live, while attached.
 */
import { randomHex } from '../../lib/random-id.ts';
import { flightError, LINGER_MS, LOST, READ_WAIT_MS, type FlightDriver, type FlightEntry, type FlightRead } from './flight-driver.ts';

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
