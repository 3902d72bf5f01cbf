/**
 * Reading an upstream's event stream: the `data:` payloads as stream parts one `next()` at a time, with the
 * size cap, `[DONE]`, mid-stream errors, aborts and dropped connections, and a body that is always
 * either read to its end or aborted. Also the small error helpers the JSON path shares.
 */
import { StringDecoder } from 'node:string_decoder';
import { createParser, type EventSourceParser, type ParseError } from 'eventsource-parser';
import { GatewayError } from '../../errors/gateway-error.ts';
import { DONE, type Pollable } from '../../lib/pollable.ts';
import { ChunkPart, PlainHead, type EventPart } from '../../protocol/stream-part.ts';
import type { CallSignal, UpstreamClientOptions } from './types.ts';
import { redact, upstreamMalformed } from '../../errors/upstream.ts';

/** Largest tail read after `data: [DONE]` while waiting for the body to end. */
const MAX_TAIL_BYTES = 64 * 1024;

/**
 * Body bytes read but not yet taken by the consumer beyond which the upstream read pauses (as a
 * Readable's high-water mark would): a consumer that stops pulling (a slow client) stops the read.
 */
const HIGH_WATER_BYTES = 64 * 1024;

/**
 * A native stream's events (another protocol's SSE, forwarded as it came): each event's name and
 * data → its part, with usage, content and end read on the way; an error event throws the
 * GatewayError it stands for.
 */
export type EventDecoder = (event: string, data: string) => EventPart;

/** What an upstream read can be told: undici's dispatch controller. */
export interface ReadControl {
  pause(): void;
  resume(): void;
  abort(reason: Error): void;
}

/**
 * The `data:` payloads of an event stream as chunk parts, one `next()` at a time: a payload in the
 * plain grammar as its text (not parsed), any other parsed and checked (JSON, an object, not an
 * error event), both keeping the text for the writer. The caller vouches that the payloads are
 * `C`s (the upstream's protocol). It is fed by the undici
 * dispatch handler of the call (StreamCall, backends/upstream/stream-call.ts) as the bytes arrive — no Readable, no
 * async iterator and no promise per read in between — and learns the end of the body in the same
 * turn as its last bytes, so a consumer sees the end without waiting for another tick. Payloads
 * are checked when taken; the read pauses while more than HIGH_WATER_BYTES wait to be taken.
 */
export class SseIterator<C extends object = object, P extends ChunkPart<C> | EventPart = ChunkPart<C>> implements AsyncIterableIterator<P>, Pollable<P> {
  private readonly decoder = new StringDecoder('utf8');
  private readonly parser: EventSourceParser;
  /** `data:` payloads read but not yet taken */
  private readonly ready: string[] = [];
  /** event mode: the `event:` names of the payloads in `ready` */
  private readonly names: string[] | undefined;
  private head = 0;
  /** raised while reading; thrown once the payloads before it are used */
  private failure: unknown = undefined;
  private sawDone = false;
  private tailBytes = 0;
  /** the body ended (or failed, or was closed): nothing more will be read */
  private finished = false;
  /** the read is over on undici's side (ended, failed or aborted) */
  private over = false;
  private paused = false;
  private waitingBytes = 0;
  private wake: (() => void) | undefined = undefined;
  /** the head this stream's chunks share, once checked (ChunkPart.plain) */
  private readonly plainHead = new PlainHead();
  private readonly stopListening: () => void;

  constructor(
    private readonly control: ReadControl,
    private readonly signal: CallSignal,
    private readonly o: UpstreamClientOptions,
    /** event mode: the events are decoded by it (not chunk parts, no `[DONE]`) */
    private readonly decodeEvent?: EventDecoder,
  ) {
    if (decodeEvent) this.names = [];
    const framing = decodeEvent ? undefined : o.sseFraming;
    this.parser = createParser({
      maxBufferSize: o.maxResponseBytes,
      onEvent: (ev) => {
        if (framing?.event) {
          const data = framing.event(ev);
          if (data !== null) this.handle(data);
        } else {
          this.handle(ev.data, ev.event);
        }
      },
      onError: (err: ParseError) => {
        if (err.type === 'max-buffer-size-exceeded') this.fail(responseTooLarge(o.backend, o.maxResponseBytes));
        else if (err.type === 'unknown-field' && framing?.unknownField && err.field !== undefined) {
          const data = framing.unknownField(err.field, err.value ?? '');
          if (data !== null) this.handle(data);
        }
      },
    });
    // an abort (the client went away, a timeout) ends the read; read() turns it into the signal's reason
    this.stopListening = onAbort(signal, () => this.abortRead(abortReason(signal)));
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  // ---- fed by the dispatch handler ----

  /** Body bytes. */
  read(chunk: Buffer): void {
    if (this.finished) return;
    if (this.sawDone) {
      // read to the end so the connection goes back to the pool, but not forever
      this.tailBytes += chunk.length;
      if (this.tailBytes > MAX_TAIL_BYTES) this.close();
      return;
    }
    this.feed(this.decoder.write(chunk));
    this.waitingBytes += chunk.length;
    if (this.waitingBytes > HIGH_WATER_BYTES && this.head < this.ready.length && !this.paused) {
      this.paused = true;
      this.control.pause();
    }
    this.notify();
  }

  /** The body ended cleanly. A last event without its blank line still counts. */
  ended(): void {
    this.over = true;
    this.stopListening();
    if (this.finished) return;
    if (!this.sawDone) this.feed(`${this.decoder.end()}\n\n`);
    this.finished = true;
    this.notify();
  }

  /** The read failed: an abort (the signal's reason), or the connection was lost. */
  failed(err: unknown): void {
    this.over = true;
    this.stopListening();
    if (this.finished) return;
    if (this.signal.aborted) this.failNow(abortReason(this.signal));
    else this.fail(connectionLost(this.o.backend, err, this.o.secrets));
    this.finished = true;
    this.notify();
  }

  // ---- taken by the consumer ----

  /** The next payload when one is read already, the failure or the end; undefined when a read is needed. */
  poll(): IteratorResult<P> | undefined {
    for (;;) {
      while (this.head < this.ready.length) {
        const name = this.names?.[this.head];
        const data = this.ready[this.head++] as string;
        if (this.head === this.ready.length) this.drained();
        // parsed when taken, not when read: the first event of a read leaves before the others are parsed
        const value = name === undefined ? (this.parse(data) as P | undefined) : (this.decode(name, data) as P | undefined);
        if (value !== undefined) return { done: false, value };
      }
      if (this.failure !== undefined) {
        const f = this.failure;
        this.failure = undefined;
        this.close();
        throw f;
      }
      if (this.finished) return DONE;
      if (!this.paused) return undefined;
      // everything read is taken: read on (which may deliver more bytes right away)
      this.paused = false;
      this.control.resume();
      if (this.head === this.ready.length && this.failure === undefined && !this.finished) return undefined;
    }
  }

  async next(): Promise<IteratorResult<P>> {
    for (;;) {
      const ready = this.poll();
      if (ready !== undefined) return ready;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }

  async return(): Promise<IteratorResult<P>> {
    this.close();
    return { done: true, value: undefined };
  }

  private notify(): void {
    const w = this.wake;
    if (w === undefined) return;
    this.wake = undefined;
    w();
  }

  private drained(): void {
    this.ready.length = 0;
    if (this.names) this.names.length = 0;
    this.head = 0;
    this.waitingBytes = 0;
  }

  private feed(text: string): void {
    if (text === '' || this.failure !== undefined) return;
    this.parser.feed(text);
  }

  private handle(data: string, event?: string): void {
    if (this.sawDone || this.failure !== undefined) return;
    if (this.names) {
      this.names.push(event ?? '');
      this.ready.push(data);
      return;
    }
    if (data.startsWith('[DONE]')) {
      this.sawDone = true;
      return;
    }
    this.ready.push(data);
  }

  /** Event mode: an event → its part; undefined when it raised a failure (thrown by next()). */
  private decode(event: string, data: string): EventPart | undefined {
    try {
      return (this.decodeEvent as EventDecoder)(event, data);
    } catch (err) {
      this.failNow(err);
      return undefined;
    }
  }

  /**
   * An event's payload → its part; undefined when it was not a chunk (the failure it raised is
   * thrown by next(), and the events read after it are dropped).
   */
  private parse(data: string): ChunkPart<C> | undefined {
    // hot path: a plain payload (an ordinary token) is not parsed
    const plain = ChunkPart.plain<C>(data, this.plainHead);
    if (plain) return plain;
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      this.failNow(upstreamMalformed(this.o.backend, 'an event of the stream is not JSON'));
      return undefined;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      this.failNow(upstreamMalformed(this.o.backend, 'an event of the stream is not a JSON object'));
      return undefined;
    }
    const error = (value as { error?: unknown }).error;
    if (error) {
      this.failNow((this.o.streamError ?? ((e: unknown) => streamErrorEvent(this.o.backend, e, this.o.secrets)))(error));
      return undefined;
    }
    return ChunkPart.parsed(value as C, data);
  }

  /** A failure found in an event being taken: it comes before anything read after that event. */
  private failNow(err: unknown): void {
    this.failure = err;
    this.drained();
  }

  private fail(err: unknown): void {
    this.failure ??= err;
  }

  /** Ends the read while undici is still reading; what it reports afterwards is ignored. */
  private abortRead(reason: Error): void {
    if (this.over) return;
    this.over = true;
    this.stopListening();
    if (!this.finished) {
      // what was read but not taken is dropped: the stream is over for its consumer now
      this.failNow(reason);
      this.finished = true;
    }
    this.control.abort(reason);
    this.notify();
  }

  /** Ends the stream for good: a body not read to its end is aborted (its connection closes). */
  private close(): void {
    this.finished = true;
    this.drained();
    if (!this.over) {
      this.over = true;
      this.stopListening();
      this.control.abort(new DOMException('The stream was closed by its consumer.', 'AbortError'));
    }
    this.notify();
  }
}

/** Calls `fn` once when `signal` aborts (an AbortSignal or an EventEmitter-style abort); the remover. */
export function onAbort(signal: CallSignal, fn: () => void): () => void {
  if (signal instanceof EventTarget) {
    signal.addEventListener('abort', fn, { once: true });
    return () => signal.removeEventListener('abort', fn);
  }
  signal.once('abort', fn);
  return () => void signal.removeListener('abort', fn);
}

/** A `data: {"error":…}` event: the OpenAI-style mid-stream error. */
export function streamErrorEvent(backend: string, error: unknown, secrets: ReadonlyArray<string>): GatewayError {
  const message = typeof error === 'object' && error !== null ? (error as { message?: unknown }).message : typeof error === 'string' ? error : undefined;
  const msg = typeof message === 'string' && message !== '' ? redact(message, secrets) : 'stream error';
  return new GatewayError('upstream_stream_error', `Backend "${backend}" reported an error mid-stream: ${msg}`, { backend });
}

export function responseTooLarge(backend: string, limit: number): GatewayError {
  return new GatewayError('upstream_response_too_large', `Backend "${backend}" sent a response larger than max_response_bytes (${limit} bytes).`, { backend });
}

export function connectionLost(backend: string, err: unknown, secrets: ReadonlyArray<string>): GatewayError {
  const detail = errorCode(err) ?? redact(err instanceof Error ? err.message : 'read failed', secrets);
  return new GatewayError('upstream_connection_lost', `Backend "${backend}" dropped the connection mid-stream (${detail}).`, { cause: err, backend });
}

/** The signal's reason when it is an Error, else a generic AbortError: always an Error. */
export function abortReason(signal: { readonly reason: unknown }): Error {
  return signal.reason instanceof Error ? signal.reason : new DOMException('The operation was aborted.', 'AbortError');
}

/** `ECONNREFUSED`, `UND_ERR_SOCKET`, … of an error or its cause. */
export function errorCode(err: unknown): string | undefined {
  for (let e: unknown = err, i = 0; e instanceof Error && i < 3; e = e.cause, i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

