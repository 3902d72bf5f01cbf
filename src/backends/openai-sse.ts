/**
 * Reading an upstream's event stream: the parsed `data:` payloads one `next()` at a time, with the
 * size cap, `[DONE]`, mid-stream errors, aborts and dropped connections, and a body that is always
 * either read to its end or destroyed. Also the small body/error helpers the JSON path shares.
 */
import { StringDecoder } from 'node:string_decoder';
import { createParser, type EventSourceParser, type ParseError } from 'eventsource-parser';
import type { Dispatcher } from 'undici';
import { GatewayError } from '../errors.ts';
import { DONE, type CommitAware, type Pollable } from '../pollable.ts';
import { keepText, PlainChunk } from '../protocol/event-text.ts';
import type { CallSignal, OpenAIHttpOptions } from './openai-http.ts';
import { redact, upstreamMalformed } from './upstream-errors.ts';

/** Largest tail read after `data: [DONE]` while waiting for the body to end. */
const MAX_TAIL_BYTES = 64 * 1024;

export type Body = Dispatcher.ResponseData['body'];

/**
 * The parsed `data:` payloads of an event stream, one `next()` at a time: a body chunk is read
 * only when the payloads of the previous one are used up, so nothing buffers beyond one chunk
 * (and one unfinished event, capped).
 */
export class SseIterator implements AsyncIterableIterator<unknown>, Pollable<unknown>, CommitAware {
  private readonly it: AsyncIterator<Buffer>;
  private readonly decoder = new StringDecoder('utf8');
  private readonly parser: EventSourceParser;
  /** `data:` payloads read but not yet taken */
  private readonly ready: string[] = [];
  private head = 0;
  /** raised while parsing a chunk; thrown once the payloads before it are used */
  private failure: unknown = undefined;
  private sawDone = false;
  private tailBytes = 0;
  private finished = false;
  /** past the commit point: plain chunks are kept as their text (PlainChunk) */
  private committed = false;

  constructor(
    private readonly body: Body,
    private readonly signal: CallSignal,
    private readonly o: OpenAIHttpOptions,
  ) {
    this.it = (body as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
    const framing = o.sseFraming;
    this.parser = createParser({
      maxBufferSize: o.maxResponseBytes,
      onEvent: (ev) => {
        if (framing?.event) {
          const data = framing.event(ev);
          if (data !== null) this.handle(data);
        } else {
          this.handle(ev.data);
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
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<unknown> {
    return this;
  }

  /** The next payload when one is read already, the failure or the end; undefined when a read is needed. */
  poll(): IteratorResult<unknown> | undefined {
    while (this.head < this.ready.length) {
      const data = this.ready[this.head++] as string;
      if (this.head === this.ready.length) {
        this.ready.length = 0;
        this.head = 0;
      }
      // parsed when taken, not when read: the first event of a read leaves before the others are parsed
      const value = this.parse(data);
      if (value !== undefined) return { done: false, value };
    }
    if (this.failure !== undefined) {
      const f = this.failure;
      this.failure = undefined;
      this.close();
      throw f;
    }
    if (this.finished) return DONE;
    return undefined;
  }

  async next(): Promise<IteratorResult<unknown>> {
    for (;;) {
      const ready = this.poll();
      if (ready !== undefined) return ready;
      let r: IteratorResult<Buffer>;
      try {
        r = await this.it.next();
      } catch (err) {
        this.close();
        if (this.signal.aborted) throw abortReason(this.signal);
        throw connectionLost(this.o.backend, err, this.o.secrets);
      }
      if (r.done) {
        // A last event without its blank line still counts: the body ended cleanly.
        if (!this.sawDone) this.feed(`${this.decoder.end()}\n\n`);
        this.finished = true;
        continue;
      }
      if (this.sawDone) {
        // Read to the end so the connection goes back to the pool, but not forever.
        this.tailBytes += r.value.length;
        if (this.tailBytes > MAX_TAIL_BYTES) this.close();
        continue;
      }
      this.feed(this.decoder.write(r.value));
    }
  }

  afterCommit(): void {
    this.committed = true;
  }

  async return(): Promise<IteratorResult<unknown>> {
    this.close();
    return { done: true, value: undefined };
  }

  private feed(text: string): void {
    if (text === '' || this.failure !== undefined) return;
    this.parser.feed(text);
  }

  private handle(data: string): void {
    if (this.sawDone || this.failure !== undefined) return;
    if (data.startsWith('[DONE]')) {
      this.sawDone = true;
      return;
    }
    this.ready.push(data);
  }

  /**
   * An event's payload → the chunk; undefined when it was not one (the failure it raised is thrown
   * by next(), and the events read after it are dropped).
   */
  private parse(data: string): object | undefined {
    if (this.committed) {
      const plain = PlainChunk.of(data);
      if (plain) return plain;
    }
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
    return keepText(value, data);
  }

  /** A failure found in an event being taken: it comes before anything read after that event. */
  private failNow(err: unknown): void {
    this.failure = err;
    this.ready.length = 0;
    this.head = 0;
  }

  private fail(err: unknown): void {
    this.failure ??= err;
  }

  /** Ends the stream for good: a body not read to its end is destroyed (its connection closes). */
  private close(): void {
    this.finished = true;
    this.ready.length = 0;
    this.head = 0;
    discard(this.body);
  }
}

/** A `data: {"error":…}` event: the OpenAI-style mid-stream error. */
export function streamErrorEvent(backend: string, error: unknown, secrets: ReadonlyArray<string>): GatewayError {
  const message = typeof error === 'object' && error !== null ? (error as { message?: unknown }).message : typeof error === 'string' ? error : undefined;
  const msg = typeof message === 'string' && message !== '' ? redact(message, secrets) : 'stream error';
  return new GatewayError(`Backend "${backend}" reported an error mid-stream: ${msg}`, {
    status: 502,
    type: 'upstream_error',
    code: 'upstream_stream_error',
    retryable: true,
    backend,
  });
}

export function responseTooLarge(backend: string, limit: number): GatewayError {
  return new GatewayError(`Backend "${backend}" sent a response larger than max_response_bytes (${limit} bytes).`, {
    status: 502,
    type: 'upstream_error',
    code: 'upstream_response_too_large',
    retryable: true,
    backend,
  });
}

export function connectionLost(backend: string, err: unknown, secrets: ReadonlyArray<string>): GatewayError {
  const detail = errorCode(err) ?? redact(err instanceof Error ? err.message : 'read failed', secrets);
  return new GatewayError(`Backend "${backend}" dropped the connection mid-stream (${detail}).`, {
    status: 502,
    type: 'upstream_error',
    code: 'upstream_connection_lost',
    retryable: true,
    cause: err,
    backend,
  });
}

/** Closes a body not read to its end (and its connection); the abort error it raises is expected. */
export function discard(body: Body): void {
  if (body.destroyed) return;
  body.on('error', noop);
  body.destroy();
}

const noop = (): void => {};

export function abortReason(signal: { readonly reason: unknown }): unknown {
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

