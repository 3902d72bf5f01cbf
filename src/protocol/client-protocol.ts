/**
 * What the gateway drives of a client protocol's translation (protocol/responses,
 * protocol/messages; run by gateway/ingress.ts).
 */
import type { ChatCompletionChunk } from './chat/schema.ts';
import type { EventPart, PartUsage } from './stream-part.ts';

/** A protocol's stream translator, as the gateway drives it: chat chunks in, the protocol's events out. */
export interface StreamTranslator {
  /** the events before any content (`response.created`, `message_start`, …) */
  start(): EventPart[];
  /** a chunk's events; a chunk that carries nothing (no delta member but role, null or "", no finish, no usage) has none */
  push(chunk: ChatCompletionChunk): EventPart[];
  /**
   * A plain token's content fragment, still JSON-escaped (protocol/chat/content-text.ts): its
   * events appended to `out`, as push() would give them for the chunk.
   */
  text?(escaped: string, out: EventPart[]): void;
  /** the closing events; the last one is final and carries `usage` */
  finish(usage: PartUsage | undefined): EventPart[];
}
