/**
 * undici dispatch handlers of the calls to an OpenAI-compatible upstream (no `Dispatcher.request`
 * and its Readable body in between): `UpstreamCall` settles what every call shares — the abort
 * before and during the call, a failure before the answer's head, a non-2xx answer (its body read
 * up to MAX_ERROR_BYTES and mapped by its status), a content coding other than identity — and
 * hands the body of a 2xx answer to its subclass: `JsonCall` (here) collects a JSON body within
 * `maxResponseBytes`; `StreamCall` (backends/upstream/stream-call.ts) feeds an event stream to its reader.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { GatewayError } from '../../errors/gateway-error.ts';
import { bodyPool } from './body-pool.ts';
import type { CallSignal, UpstreamClientOptions } from './types.ts';
import { abortReason, errorCode, onAbort, responseTooLarge } from './sse-reader.ts';
import { encodingError, MAX_ERROR_BYTES, statusErrorOf } from './status.ts';
import { redact, upstreamMalformed, upstreamUnreachable } from '../../errors/upstream.ts';

const first = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);

export abstract class UpstreamCall implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  /** the call's promise is settled (resolved or rejected) */
  protected settled = false;
  /** a 2xx head was taken: the body is the subclass's */
  private taking = false;
  private status = 0;
  private headers: IncomingHttpHeaders = {};
  private errorBody: Buffer[] | undefined;
  private errorBytes = 0;
  /** stops listening to the call's abort (once settled, or when a subclass takes the abort over) */
  protected readonly stopListening: () => void;

  constructor(
    protected readonly o: UpstreamClientOptions,
    protected readonly signal: CallSignal,
    private readonly reject: (err: unknown) => void,
  ) {
    this.stopListening = onAbort(signal, () => {
      // settle now (the router is waiting); undici's read is aborted when it starts, or now
      this.settle(abortReason(signal));
      this.controller?.abort(abortReason(signal));
    });
    if (signal.aborted) this.settle(abortReason(signal));
  }

  /**
   * A 2xx answer's head (in identity coding): the error when the call refuses it (its body is then
   * not read), else undefined, the call having taken the head; its body follows.
   */
  protected abstract begin(controller: Dispatcher.DispatchController, headers: IncomingHttpHeaders): GatewayError | undefined;
  protected abstract data(controller: Dispatcher.DispatchController, chunk: Buffer): void;
  protected abstract end(): void;
  /** The 2xx body failed (a lost connection, or the abort of the call). */
  protected abstract failed(err: Error): void;

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.settled && !this.taking) controller.abort(abortReason(this.signal));
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (statusCode < 200) return; // informational
    if (this.settled) {
      controller.abort(abortReason(this.signal));
      return;
    }
    this.status = statusCode;
    this.headers = headers;
    if (statusCode > 299) {
      this.errorBody = [];
      return;
    }
    const bad = encodingError(this.o.backend, first(headers['content-encoding'])) ?? this.begin(controller, headers);
    if (bad) {
      this.settle(bad);
      controller.abort(bad);
      return;
    }
    this.taking = true;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.taking) {
      this.data(controller, chunk);
      return;
    }
    if (this.errorBody === undefined || this.settled) return;
    const room = MAX_ERROR_BYTES - this.errorBytes;
    this.errorBody.push(room < chunk.length ? chunk.subarray(0, room) : chunk);
    this.errorBytes += Math.min(room, chunk.length);
    if (room <= chunk.length) {
      // the status says enough; the rest of an oversized error body is not read
      this.settleStatus();
      controller.abort(new Error('error body over its cap'));
    }
  }

  onResponseEnd(): void {
    if (this.taking) {
      this.end();
      return;
    }
    if (this.errorBody !== undefined) this.settleStatus();
    else this.settle(upstreamMalformed(this.o.backend, 'the answer ended before its head'));
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, err: Error): void {
    if (this.taking) {
      this.failed(err);
      return;
    }
    if (this.signal.aborted) this.settle(abortReason(this.signal));
    // a non-2xx answer whose body could not be read to its end: the status says enough
    else if (this.errorBody !== undefined) this.settleStatus();
    else this.settle(upstreamUnreachable(this.o.backend, errorCode(err) ?? redact(err.message, this.o.secrets)));
  }

  private settleStatus(): void {
    const text = Buffer.concat(this.errorBody ?? [], this.errorBytes).toString('utf8');
    const headers = this.headers;
    this.settle(statusErrorOf(this.o, this.status, (n) => first(headers[n]), text));
  }

  /** Rejects the call (once). */
  protected settle(err: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.stopListening();
    this.reject(err);
  }
}

const JSON_TYPE = /^application\/(?:[\w!#$%&*.^`|~+-]+\+)?json\s*(?:;|$)/i;

/**
 * A call answered with JSON: resolves with the body's bytes once it ended, within
 * `maxResponseBytes`. A body of a known length is copied into one buffer as its chunks arrive (so
 * each chunk can go at once; a large embeddings answer is held once, not twice at its end); one of
 * an unknown length is collected and joined. A 2xx answer that says it is not JSON, or longer than
 * the cap, is refused at its head.
 */
export class JsonCall extends UpstreamCall {
  private out: Buffer<ArrayBuffer> | undefined;
  private chunks: Buffer[] = [];
  private n = 0;

  constructor(o: UpstreamClientOptions, signal: CallSignal, private readonly resolve: (bytes: Buffer<ArrayBuffer>) => void, reject: (err: unknown) => void) {
    super(o, signal, reject);
  }

  protected begin(_controller: Dispatcher.DispatchController, headers: IncomingHttpHeaders): GatewayError | undefined {
    const type = first(headers['content-type']);
    if (type !== undefined && !JSON_TYPE.test(type)) return upstreamMalformed(this.o.backend, `expected JSON, got content-type "${redact(type.slice(0, 100), this.o.secrets)}"`);
    const length = Number(first(headers['content-length']) ?? Number.NaN);
    if (length > this.o.maxResponseBytes) return responseTooLarge(this.o.backend, this.o.maxResponseBytes);
    // (the HTTP framing keeps the body within its content-length)
    if (Number.isInteger(length) && length >= 0) this.out = bodyPool.take(length);
    return undefined;
  }

  protected data(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return;
    if (this.out) {
      this.n += chunk.copy(this.out, this.n);
      return;
    }
    if (this.n + chunk.length > this.o.maxResponseBytes) {
      const err = responseTooLarge(this.o.backend, this.o.maxResponseBytes);
      this.settle(err);
      controller.abort(err);
      return;
    }
    this.chunks.push(chunk);
    this.n += chunk.length;
  }

  protected end(): void {
    if (this.settled) return;
    if (this.out && this.n !== this.out.length) {
      this.settle(upstreamUnreachable(this.o.backend, `connection lost (the body ended after ${this.n} of ${this.out.length} bytes)`));
      return;
    }
    this.settled = true;
    this.stopListening();
    this.resolve(this.out ?? (Buffer.concat(this.chunks, this.n) as Buffer<ArrayBuffer>));
  }

  protected failed(err: Error): void {
    if (this.signal.aborted) this.settle(abortReason(this.signal));
    else this.settle(upstreamUnreachable(this.o.backend, `connection lost (${errorCode(err) ?? redact(err.message, this.o.secrets)})`));
  }
}
