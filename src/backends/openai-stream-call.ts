/**
 * The undici dispatch handler of a stream request to an OpenAI-compatible upstream (no Readable in
 * between): it settles the call at the answer's head and then feeds the body to its SseIterator.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { CallSignal, OpenAIHttpOptions } from './openai-http.ts';
import { abortReason, errorCode, onAbort, SseIterator } from './openai-sse.ts';
import { encodingError, MAX_ERROR_BYTES, statusErrorOf } from './openai-status.ts';
import { redact, upstreamMalformed, upstreamUnreachable } from './upstream-errors.ts';

/**
 * The dispatch handler of a stream request (undici's handler API, no Readable in between): until
 * the answer's head it settles the call — a 2xx head resolves it with the SseIterator it then
 * feeds; any other status is read (up to MAX_ERROR_BYTES) and rejects it with the status mapping;
 * a failure before the head rejects it as unreachable, or with the signal's reason after an abort.
 */
export class StreamCall implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private settled = false;
  private iterator: SseIterator | undefined;
  private status = 0;
  private headers: IncomingHttpHeaders = {};
  private errorBody: Buffer[] | undefined;
  private errorBytes = 0;
  private readonly stopListening: () => void;

  constructor(
    private readonly o: OpenAIHttpOptions,
    private readonly signal: CallSignal,
    private readonly resolve: (it: SseIterator) => void,
    private readonly reject: (err: unknown) => void,
  ) {
    this.stopListening = onAbort(signal, () => {
      // settle now (the router is waiting); undici's read is aborted when it starts, or now
      this.settle(abortReason(signal));
      this.controller?.abort(abortReason(signal));
    });
    if (signal.aborted) this.settle(abortReason(signal));
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.settled && this.iterator === undefined) controller.abort(abortReason(this.signal));
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
    const enc = headers['content-encoding'];
    const bad = encodingError(this.o.backend, Array.isArray(enc) ? enc[0] : enc);
    if (bad) {
      this.settle(bad);
      controller.abort(bad);
      return;
    }
    this.stopListening();
    this.settled = true;
    this.iterator = new SseIterator(controller, this.signal, this.o);
    this.resolve(this.iterator);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.iterator) {
      this.iterator.read(chunk);
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
    if (this.iterator) {
      this.iterator.ended();
      return;
    }
    if (this.errorBody !== undefined) this.settleStatus();
    else this.settle(upstreamMalformed(this.o.backend, 'the answer ended before its head'));
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, err: Error): void {
    if (this.iterator) {
      this.iterator.failed(err);
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
    this.settle(
      statusErrorOf(this.o, this.status, (n) => {
        const v = headers[n];
        return Array.isArray(v) ? v[0] : v;
      }, text),
    );
  }

  private settle(err: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.stopListening();
    this.reject(err);
  }
}
