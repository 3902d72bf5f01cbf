/**
 * What the gateway needs of a client protocol other than chat (OpenAI's Responses API, Anthropic's
 * Messages API) to run its requests. Each protocol folder has one adapter implementing it
 * (protocol/responses/adapter.ts, protocol/messages/adapter.ts); the gateway (gateway/ingress.ts,
 * gateway/operations.ts) runs any of them alike: each target natively when its backend speaks the
 * protocol (the client's body with only `model` replaced), else through the canonical chat form and
 * back, in one attempt chain.
 *
 * The contract lives here, below the gateway, as the backends' contract lives with the backends:
 * an adapter declares that it implements it, so a missing or mistyped step fails to compile in its
 * own folder, and every term of it is a protocol-layer type.
 */
import type { ChatCompletion, ChatCompletionChunk, ChatRequest } from './chat/schema.ts';
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

/** The client protocols other than chat; each names its backends' native methods (`responses`/`responsesStream`, `messages`/`messagesStream`). */
export type ClientOp = 'responses' | 'messages';

/** A JSON object as a client or a native upstream sends it. */
export type ClientJson = Record<string, unknown>;

/** The client's body as the gateway reads it: its model, and the members the cache key looks at. */
export type ClientBody = ClientJson & { model: string; temperature?: number | null | undefined };

/** The texts of a prompt and the tokens added around them, for the token reservation. */
export interface ClientPrompt {
  texts: string[];
  fixed: number;
}

/**
 * One request of a client protocol, as its adapter made it: the parsed request and what the
 * translations of this request share (ids, tool names, what they left out). Made once per request
 * by the protocol's own function (each takes what its protocol needs), then handed to the gateway
 * with the adapter.
 */
export interface ClientTurn<Req> {
  /** the client's request as parsed */
  readonly request: Req;
  /** what a native backend gets (the gateway replaces `model`); also the cache key's part */
  readonly nativeBody: ClientBody;
  /** the protocol headers the client sent that a native upstream should see */
  readonly nativeHeaders?: Record<string, string> | undefined;
  /** what the translations left out so far: for the log line and `x-switchyard-warnings` */
  readonly warnings: string[];
}

/** The request headers as Node gives them. */
export type IncomingHeaders = Readonly<Record<string, string | string[] | undefined>>;

/**
 * A client protocol as the gateway runs it, one method per step. `Turn` is the protocol's own
 * per-request state; the gateway only hands it back.
 */
export interface ClientProtocol<Req, Turn extends ClientTurn<Req>> {
  /** the operation: the backends' native methods for it, the limits' and the metrics' name */
  readonly op: ClientOp;
  /** the body checked for what the gateway needs (the client's own object, loose); a 400 naming the field otherwise */
  parse(body: unknown): Req;
  /** the protocol headers among the client's that a native upstream should see */
  nativeHeaders(headers: IncomingHeaders): Record<string, string> | undefined;
  /**
   * The canonical chat request, for a translating backend: called at most once per request, when
   * the first such target is tried. `backendTypes`: the types of the targets that serve the model,
   * in its order (a translation may use what every one of them reads).
   */
  toChat(turn: Turn, backendTypes: readonly string[]): ChatRequest;
  /** a translated JSON answer in the client's protocol */
  fromChat(completion: ChatCompletion, turn: Turn): ClientJson;
  /**
   * A new translator for one translated stream. `inputTokens`: the prompt's tokens as the gateway
   * counts them, given when `streamOpensWithInputTokens` (else undefined).
   */
  streamFromChat(turn: Turn, inputTokens: number | undefined): StreamTranslator;
  /**
   * The protocol's stream opens with the prompt's tokens (Messages' `message_start`), before the
   * upstream reports its usage at the end: the gateway counts them while the upstream answers.
   */
  readonly streamOpensWithInputTokens: boolean;
  /** a JSON answer's usage (native or translated) in the Chat Completions names */
  usageOf(answer: ClientJson): PartUsage | undefined;
  /** the prompt, for the token reservation */
  promptOf(turn: Turn): ClientPrompt;
  /** the client's output limit (`max_output_tokens`, `max_tokens`), for the reservation and the cost policy */
  maxOutputTokensOf(turn: Turn): number | undefined;
  /** what a native backend is not sent of the request (said when one served it) */
  nativeWarnings?(turn: Turn): string[];
}
