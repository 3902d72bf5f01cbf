/**
 * A Responses request's conversation, kept by the gateway in its stored responses
 * (responses-store.ts), per owner (the API key's name: another key's ids are as unknown as missing
 * ones):
 *
 * - `previous_response_id`: the stored conversation's items go ahead of this turn's input;
 * - `item_reference`: each reference is replaced by the item it names, from that conversation
 *   first, else from the owner's stored responses (one batched lookup);
 * - the final response is stored (`store` ≠ false) before its answer or its last event goes out,
 *   so an immediate next turn finds it;
 * - the client gets back the `previous_response_id` it sent, even from a native backend, which was
 *   sent the expanded conversation instead (responses-echo.ts).
 *
 * A native backend is sent the conversation expanded into its input, so a conversation continues
 * on any target and the upstream never needs the gateway's ids; a translating one gets the same
 * items through the protocol's toChat (protocol/responses/adapter.ts).
 */
import type { JsonObject } from '../backends/contract.ts';
import { GatewayError, asGatewayError, invalidRequest } from '../errors/gateway-error.ts';
import { DONE, mapped, pollable, type Pollable } from '../lib/pollable.ts';
import type { ClientBody } from '../protocol/client-protocol.ts';
import { responsesTurn, type InputItem, type Response, type ResponsesRequest, type ResponsesTurn } from '../protocol/responses/index.ts';
import type { EventPart } from '../protocol/stream-part.ts';
import { withTrace, type Logger, type TraceIds } from '../telemetry/logger.ts';
import { echoPreviousId, echoPreviousIdInEvent } from './responses-echo.ts';
import { inputItemsOf, nextHistory, type ResponsesStore, type StoredResponse } from './responses-store.ts';

/** What a conversation needs of its generation. */
export interface ConversationDeps {
  responses: ResponsesStore;
  logger: Logger;
}

/** The request a conversation belongs to, for its log lines. */
export interface ConversationRequest {
  requestId: string;
  trace?: TraceIds | undefined;
}

const isItem = (v: unknown): v is InputItem => typeof v === 'object' && v !== null && !Array.isArray(v);

/** OpenAI's answer for an unknown, expired or another key's `previous_response_id`. */
function previousNotFound(id: string): GatewayError {
  return invalidRequest(`Previous response with id '${id}' not found.`, 'previous_response_id', 'previous_response_not_found');
}

/** OpenAI's answer for an `item_reference` to an unknown, expired, deleted or another key's item. */
function itemNotFound(id: string): GatewayError {
  return new GatewayError('item_not_found', `Item with id '${id}' not found.`, { param: 'input' });
}

/** The ids of the request's `item_reference` input items (an item without `type` or `role` is one), in order. */
function referenceIds(input: ResponsesRequest['input']): string[] {
  if (!Array.isArray(input)) return [];
  const ids: string[] = [];
  for (const item of input) {
    if (!isItem(item)) continue;
    const type = item.type ?? ('role' in item ? 'message' : 'item_reference');
    if (type === 'item_reference' && typeof item.id === 'string') ids.push(item.id);
  }
  return ids;
}

/** The request's input with each `item_reference` replaced by the item it names (all resolved by then). */
function expandReferences(input: ResponsesRequest['input'], resolve: (id: string) => InputItem | undefined): ResponsesRequest['input'] {
  if (!Array.isArray(input)) return input;
  return input.map((item) => {
    if (!isItem(item) || typeof item.id !== 'string') return item;
    const type = item.type ?? ('role' in item ? 'message' : 'item_reference');
    return type === 'item_reference' ? (resolve(item.id) ?? item) : item;
  });
}

/**
 * A resolved item as a native upstream takes it: an input message (`input_items` lists it with the
 * id the gateway gave it) goes without `id`, which OpenAI's input message does not have.
 */
function nativeItem(item: InputItem | undefined): InputItem | undefined {
  if (!item || item.type !== 'message' || item.role === 'assistant' || !('id' in item)) return item;
  const { id: _id, ...rest } = item;
  return rest as InputItem;
}

/** What a native backend gets: the client's body with the conversation's items ahead of `nativeInput`, without `previous_response_id`. */
function nativeBody(req: ResponsesRequest, history: readonly InputItem[], nativeInput: ResponsesRequest['input']): ClientBody {
  if (!req.previous_response_id && nativeInput === req.input) return req as unknown as ClientBody;
  const input = typeof nativeInput === 'string' ? [{ type: 'message', role: 'user', content: nativeInput }] : (nativeInput ?? []);
  const expanded: Record<string, unknown> = { ...req, input: [...history, ...input] };
  delete expanded.previous_response_id;
  return expanded as ClientBody;
}

/**
 * The request's conversation, read from `owner`'s stored responses: a 400 for an unknown
 * `previous_response_id`, a 404 for an unknown `item_reference`.
 */
export async function openConversation(deps: ConversationDeps, owner: string, req: ResponsesRequest, request: ConversationRequest): Promise<Conversation> {
  const store = deps.responses;
  let previous: StoredResponse | undefined;
  if (req.previous_response_id) {
    previous = await store.get(owner, req.previous_response_id);
    if (!previous) throw previousNotFound(req.previous_response_id);
  }
  const history = (previous?.history ?? []).filter(isItem);
  // item_reference: the previous response's conversation first, then this key's stored items (one
  // batched lookup, only when the input has references the conversation does not answer)
  const byId = new Map<string, InputItem>();
  for (const item of history) if (typeof item.id === 'string') byId.set(item.id, item);
  const refs = referenceIds(req.input);
  if (refs.length > 0) {
    const missing = refs.filter((id) => !byId.has(id));
    const found = missing.length > 0 ? await store.resolveItems(owner, missing) : new Map<string, Record<string, unknown>>();
    for (const id of missing) {
      const item = found.get(id);
      if (!item) throw itemNotFound(id);
      byId.set(id, item as InputItem);
    }
  }
  // what is stored and sent natively: the references replaced by their items, so a later turn or
  // another target never depends on them again
  const input = refs.length > 0 ? expandReferences(req.input, (id) => byId.get(id)) : req.input;
  const nativeInput = refs.length > 0 ? expandReferences(req.input, (id) => nativeItem(byId.get(id))) : req.input;
  const turn = responsesTurn(req, { history, resolveItem: (id) => byId.get(id), input, nativeBody: nativeBody(req, history, nativeInput) });
  return new Conversation(deps, owner, request, turn, previous, input);
}

export class Conversation {
  constructor(
    private readonly deps: ConversationDeps,
    private readonly owner: string,
    private readonly request: ConversationRequest,
    /** the request as the gateway runs it (protocol/responses/adapter.ts) */
    readonly turn: ResponsesTurn,
    private readonly previous: StoredResponse | undefined,
    /** this turn's input, references replaced by their items */
    private readonly input: ResponsesRequest['input'],
  ) {}

  /** Whether the answer is stored: then it is a new object per request, never served from the cache (it would repeat an id). */
  get stored(): boolean {
    return this.turn.request.store !== false;
  }

  /** The JSON answer as the client gets it (its `previous_response_id` echoed), stored first. */
  async answer(result: JsonObject): Promise<JsonObject> {
    const prevId = this.turn.request.previous_response_id;
    const answer = prevId ? echoPreviousId(result, prevId) : result;
    await this.keep(answer as unknown as Response);
    return answer;
  }

  /** The stream's events as the client gets them: `previous_response_id` echoed, the final response stored before its event goes out. */
  events(src: AsyncIterable<EventPart>): AsyncIterable<EventPart> {
    const prevId = this.turn.request.previous_response_id;
    const events = prevId ? mapped(src, (p) => echoPreviousIdInEvent(p, prevId)) : src;
    return this.stored ? new KeepingFinal(events[Symbol.asyncIterator](), (r) => this.keep(r)) : events;
  }

  /** Stores the final response (`store` ≠ false); one that is not stored is logged, never the client's failure. */
  private async keep(response: Response): Promise<void> {
    if (!this.stored) return;
    const rec: StoredResponse = {
      response: response as unknown as Record<string, unknown>,
      inputItems: inputItemsOf(this.input),
      history: nextHistory(this.previous, this.input, response.output),
    };
    // a native upstream names its own responses: the client continues from the id it was given
    const id = typeof response.id === 'string' && response.id !== '' ? response.id : this.turn.ctx.id;
    let why: string;
    try {
      const r = await this.deps.responses.put(this.owner, id, rec);
      if (r.stored) return;
      why = `${r.reason} (${r.bytes} bytes)`;
    } catch (err) {
      const e = asGatewayError(err);
      why = e.code ?? e.type;
    }
    this.deps.logger.warn('response not stored', withTrace({ request_id: this.request.requestId, reason: why }, this.request.trace));
  }
}

/**
 * The stream's parts as they are, except that the final response is stored before its event is
 * handed on (an immediate next turn finds it). Hot path: every other part passes by `poll()`
 * without a promise; only the final one waits for the store.
 */
class KeepingFinal implements AsyncIterableIterator<EventPart>, Pollable<EventPart> {
  /** a final part taken by poll(), handed on by the next next() once stored */
  private held: EventPart | undefined;

  constructor(
    private readonly it: AsyncIterator<EventPart>,
    private readonly keep: (r: Response) => Promise<void>,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  poll(): IteratorResult<EventPart> | undefined {
    if (this.held) return undefined;
    const r = pollable(this.it)?.poll();
    if (r === undefined || r.done || !r.value.final) return r;
    this.held = r.value;
    return undefined;
  }

  async next(): Promise<IteratorResult<EventPart>> {
    let part = this.held;
    this.held = undefined;
    if (!part) {
      const r = await this.it.next();
      if (r.done) return r;
      part = r.value;
    }
    if (part.final) {
      const response = finalResponse(part);
      if (response) await this.keep(response);
    }
    return { done: false, value: part };
  }

  async return(v?: unknown): Promise<IteratorResult<EventPart>> {
    return (await this.it.return?.(v)) ?? DONE;
  }
}

/** The Response a terminal event carries, or undefined. */
function finalResponse(part: EventPart): Response | undefined {
  try {
    const ev = JSON.parse(part.data) as { response?: unknown };
    return typeof ev.response === 'object' && ev.response !== null ? (ev.response as Response) : undefined;
  } catch {
    return undefined;
  }
}
