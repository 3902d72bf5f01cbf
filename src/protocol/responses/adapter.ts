/**
 * The Responses API as a client protocol the gateway runs (protocol/client-protocol.ts): the steps
 * of this folder (schema, to-chat, from-chat, stream, usage) behind one object, `responsesProtocol`.
 *
 * A request's conversation (`previous_response_id`, `item_reference`) is the gateway's to expand
 * (gateway/conversations.ts): it makes the turn with `responsesTurn(req, conversation)`.
 */
import type { ClientBody, ClientJson, ClientPrompt, ClientProtocol, ClientTurn } from '../client-protocol.ts';
import { fromChat as answerFromChat, newResponseId, type ResponseContext } from './from-chat.ts';
import { parseResponsesRequest, type InputItem, type ResponsesRequest } from './schema.ts';
import { StreamFromChat } from './stream.ts';
import { toChat as requestToChat } from './to-chat.ts';
import { usageOf as answerUsage } from './usage.ts';

/** What the stored conversation adds to a request (gateway/conversations.ts). */
export interface ResponsesConversation {
  /** the stored conversation's items (`previous_response_id`), oldest first: placed before the input */
  history: readonly InputItem[];
  /** the item an `item_reference` names */
  resolveItem: (id: string) => InputItem | undefined;
  /** the input with each `item_reference` replaced by its item: what is counted and stored */
  input: ResponsesRequest['input'];
  /** what a native backend gets: the conversation expanded into the input, no ids of the gateway's */
  nativeBody: ClientBody;
}

/** One Responses request: its answer's id and time (fixed when it arrives), its conversation, its tool names once translated. */
export interface ResponsesTurn extends ClientTurn<ResponsesRequest> {
  readonly ctx: ResponseContext;
  readonly conversation: ResponsesConversation | undefined;
}

/** A request's turn; `conversation` when it continues a stored one or references stored items. */
export function responsesTurn(req: ResponsesRequest, conversation?: ResponsesConversation): ResponsesTurn {
  return {
    request: req,
    nativeBody: conversation?.nativeBody ?? (req as unknown as ClientBody),
    warnings: [],
    ctx: { id: newResponseId(), createdAt: Math.floor(Date.now() / 1000), model: req.model, request: req },
    conversation,
  };
}

/** The texts of a request's instructions and input (and the stored conversation), for the token reservation. */
function promptOf(turn: ResponsesTurn): ClientPrompt {
  const req = turn.request;
  const history = turn.conversation?.history ?? [];
  const input = turn.conversation ? turn.conversation.input : req.input;
  const texts: string[] = [];
  if (typeof req.instructions === 'string') texts.push(req.instructions);
  const walk = (v: unknown): void => {
    if (typeof v === 'string') texts.push(v);
    else if (Array.isArray(v)) for (const e of v) walk(e);
    else if (typeof v === 'object' && v !== null) {
      const o = v as Record<string, unknown>;
      for (const k of ['text', 'content', 'arguments', 'output', 'input']) if (k in o) walk(o[k]);
    }
  };
  walk(history);
  walk(input);
  return { texts, fixed: 3 * (history.length + (Array.isArray(input) ? input.length : 1)) };
}

export const responsesProtocol: ClientProtocol<ResponsesRequest, ResponsesTurn> = {
  op: 'responses',
  parse: parseResponsesRequest,
  // the Responses API has no protocol headers of its own
  nativeHeaders: () => undefined,
  toChat(turn) {
    const c = turn.conversation;
    const t = requestToChat(turn.request, c ? { history: c.history, resolveItem: c.resolveItem } : {});
    turn.ctx.names = t.names;
    turn.warnings.push(...t.warnings);
    return t.chat;
  },
  fromChat: (completion, turn) => answerFromChat(completion, turn.ctx) as unknown as ClientJson,
  streamFromChat: (turn) => new StreamFromChat(turn.ctx),
  streamOpensWithInputTokens: false,
  usageOf: (answer) => answerUsage(answer),
  promptOf,
  maxOutputTokensOf: (turn) => (typeof turn.request.max_output_tokens === 'number' ? turn.request.max_output_tokens : undefined),
};
