/**
 * The translated streams in process: the bench's chat stream (a role chunk, 20 tokens, the
 * finish, usage) through the gateway's translation into Responses and Messages events and their
 * SSE text, in µs per response, next to writing the same chat chunks as they came (the chat
 * route's work for them). No network, no router: the translation's own cost.
 *
 *   node --import tsx bench/translate-streams.ts [--n 20000]
 */
import { sseScript } from './payloads.ts';
import { ChunkPart, PlainHead, sseText, type StreamPart } from '../src/protocol/stream-part.ts';
import { DONE, pollable, type Pollable } from '../src/lib/pollable.ts';
import * as responses from '../src/protocol/responses/index.ts';
import * as messages from '../src/protocol/messages/index.ts';
import { translatedEvents } from '../src/gateway/ingress.ts';
import type { StreamTranslator } from '../src/protocol/client-protocol.ts';
import type { ChatCompletionChunk } from '../src/protocol/chat/schema.ts';

const arg = process.argv.indexOf('--n');
const N = arg > 0 ? Number(process.argv[arg + 1]) : 20_000;

const script = sseScript('m');
// each event's JSON text, as the upstream reader hands it on
const texts = [...script.chunks, script.usage].map((b) => b.toString().slice('data: '.length, -2));
const request = responses.parseResponsesRequest({ model: 'm', instructions: 'You are a helpful assistant.', input: 'Say hello.', max_output_tokens: 32, temperature: 0, store: false, stream: true });

/** The upstream reader's parts of one stream read whole: every part ready now (poll()), as in the gateway. */
class Chunks implements AsyncIterableIterator<ChunkPart<ChatCompletionChunk>>, Pollable<ChunkPart<ChatCompletionChunk>> {
  private i = 0;
  private readonly head = new PlainHead();
  [Symbol.asyncIterator](): this {
    return this;
  }
  poll(): IteratorResult<ChunkPart<ChatCompletionChunk>> {
    const t = texts[this.i++];
    if (t === undefined) return DONE;
    return { done: false, value: ChunkPart.plain<ChatCompletionChunk>(t, this.head) ?? ChunkPart.parsed(JSON.parse(t) as ChatCompletionChunk, t) };
  }
  next(): Promise<IteratorResult<ChunkPart<ChatCompletionChunk>>> {
    return Promise.resolve(this.poll());
  }
}

/** The SSE text of every part, pulled as the SSE writer pulls them (poll, else next). */
async function drain(it: AsyncIterator<StreamPart>): Promise<number> {
  const p = pollable(it);
  let bytes = 0;
  for (;;) {
    const r = p?.poll() ?? (await it.next());
    if (r.done) return bytes;
    bytes += sseText(r.value).length;
  }
}

const translators: Record<string, () => StreamTranslator> = {
  responses: () => new responses.StreamFromChat({ id: responses.newResponseId(), createdAt: 1, model: 'm', request }),
  messages: () => new messages.StreamFromChat(new messages.EventsFromChat({ model: 'm' })),
};

async function once(kind: string): Promise<number> {
  const make = translators[kind];
  return drain(make ? translatedEvents(new Chunks(), make()) : new Chunks());
}

const only = process.argv.indexOf('--only');
const kinds = only > 0 ? [process.argv[only + 1] ?? ''] : ['chat (as it came)', 'responses', 'messages'];
for (const kind of kinds) {
  let bytes = 0;
  for (let i = 0; i < N / 5; i++) bytes = await once(kind);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await once(kind);
  const us = Number(process.hrtime.bigint() - t0) / 1000 / N;
  console.log(`${kind.padEnd(18)} ${us.toFixed(1).padStart(6)} µs/response  ${bytes} bytes of SSE`);
}
