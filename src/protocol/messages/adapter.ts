/**
 * The Messages API as a client protocol the gateway runs (protocol/client-protocol.ts): the steps
 * of this folder (schema, to-chat, from-chat, stream, usage, count-tokens) behind one object,
 * `messagesProtocol`.
 */
import type { ClientBody, ClientJson, ClientProtocol, ClientTurn, IncomingHeaders } from '../client-protocol.ts';
import { promptOf as requestPrompt } from './count-tokens.ts';
import { fromChat as answerFromChat } from './from-chat.ts';
import { parseMessagesRequest, type MessagesRequest } from './schema.ts';
import { gatewayThinkingCount } from './signature.ts';
import { EventsFromChat, StreamFromChat } from './stream.ts';
import { toChat as requestToChat, type ToChatOptions } from './to-chat.ts';
import { usageOf as answerUsage } from './usage.ts';

/** The Anthropic headers a native upstream should see. */
const PROTOCOL_HEADERS = ['anthropic-version', 'anthropic-beta'];

export type MessagesTurn = ClientTurn<MessagesRequest>;

/** A request's turn: its body as a native backend gets it, the protocol headers the client sent. */
export function messagesTurn(req: MessagesRequest, nativeHeaders: Record<string, string> | undefined): MessagesTurn {
  return { request: req, nativeBody: req as unknown as ClientBody, nativeHeaders, warnings: [] };
}

/** The Anthropic headers among the client's, as it sent them. */
function nativeHeaders(headers: IncomingHeaders): Record<string, string> | undefined {
  let out: Record<string, string> | undefined;
  for (const name of PROTOCOL_HEADERS) {
    const v = headers[name];
    const value = Array.isArray(v) ? v.join(',') : v;
    if (value !== undefined && value !== '') (out ??= {})[name] = value;
  }
  return out;
}

/** Translation options from the backend types of the targets that serve the model (an alias's or a pattern's too). */
export function toChatOptionsFor(backendTypes: readonly string[]): ToChatOptions {
  const allLlama = backendTypes.length > 0 && backendTypes.every((t) => t === 'llamacpp');
  // reasoning history and top_k only where every target reads them (OpenAI's API refuses top_k)
  return { reasoningContent: allLlama, topK: allLlama };
}

export const messagesProtocol: ClientProtocol<MessagesRequest, MessagesTurn> = {
  op: 'messages',
  parse: parseMessagesRequest,
  nativeHeaders,
  toChat(turn, backendTypes) {
    const t = requestToChat(turn.request, toChatOptionsFor(backendTypes));
    turn.warnings.push(...t.warnings);
    return t.chat;
  },
  fromChat(completion, turn) {
    const m = answerFromChat(completion, { model: turn.request.model, stopSequences: turn.request.stop_sequences });
    turn.warnings.push(...m.warnings);
    return m.message as unknown as ClientJson;
  },
  streamFromChat(turn, inputTokens) {
    const events = new EventsFromChat({ model: turn.request.model, stopSequences: turn.request.stop_sequences, inputTokens });
    return new StreamFromChat(events, () => turn.warnings.push(...events.warnings));
  },
  streamOpensWithInputTokens: true,
  usageOf: (answer) => answerUsage(answer),
  promptOf: (turn) => requestPrompt(turn.request),
  maxOutputTokensOf: (turn) => turn.request.max_tokens,
  // a native (Anthropic) target gets the history without the thinking blocks the gateway signed
  // (backends/anthropic/native.ts)
  nativeWarnings(turn) {
    const n = gatewayThinkingCount(turn.request as unknown as ClientJson);
    return n > 0 ? [`messages: ${n} thinking block(s) signed by the gateway or unsigned left out (Anthropic accepts only its own signatures)`] : [];
  },
};
