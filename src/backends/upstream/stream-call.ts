/**
 * The undici dispatch handler of a stream request to an OpenAI-compatible upstream (no Readable in
 * between): it settles the call at the answer's head (UpstreamCall, backends/upstream/call.ts) and then feeds
 * the body to its SseIterator.
 */
import type { Dispatcher } from 'undici';
import { UpstreamCall } from './call.ts';
import type { CallSignal, UpstreamClientOptions } from './types.ts';
import { SseIterator, type EventDecoder } from './sse-reader.ts';
import type { ChunkPart, EventPart } from '../../protocol/stream-part.ts';

/**
 * A 2xx head resolves the call with the SseIterator it then feeds (which listens to the call's
 * abort from then on); everything before it is UpstreamCall's.
 */
export class StreamCall<C extends object, P extends ChunkPart<C> | EventPart = ChunkPart<C>> extends UpstreamCall {
  private iterator!: SseIterator<C, P>;

  constructor(
    o: UpstreamClientOptions,
    signal: CallSignal,
    private readonly resolve: (it: SseIterator<C, P>) => void,
    reject: (err: unknown) => void,
    /** event mode (a native stream of another protocol): how its events become parts */
    private readonly decodeEvent?: EventDecoder,
  ) {
    super(o, signal, reject);
  }

  protected begin(controller: Dispatcher.DispatchController): undefined {
    this.stopListening();
    this.settled = true;
    this.iterator = new SseIterator<C, P>(controller, this.signal, this.o, this.decodeEvent);
    this.resolve(this.iterator);
    return undefined;
  }

  protected data(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.iterator.read(chunk);
  }

  protected end(): void {
    this.iterator.ended();
  }

  protected failed(err: Error): void {
    this.iterator.failed(err);
  }
}
