/**
 * The OpenAI Responses API (`POST /v1/responses`) as pure protocol functions. The mapping table for
 * translated backends is in ./README.md.
 *
 * ## For the HTTP route and the gateway
 *
 * 1. Validate: `parseResponsesRequest(body)` → `ResponsesRequest` (the client's own object, loose;
 *    throws the gateway's 400 `invalid_request_error` with `param`). Route on `req.model`.
 *
 * 2. Native backend (speaks the Responses API): send the body with only `model` replaced; read
 *    - JSON: `usageFromResponse(body)` → `{prompt_tokens, completion_tokens, total_tokens, …}`;
 *    - SSE: per event, `isContentEvent(data)` (or `isContentEventType(type, item?.type)`) marks the
 *      commit point (before it, fail over; after it, forward); `usageFromEvent(data)` reads usage
 *      from `response.completed` / `incomplete` / `failed`; `isFinalEvent(data)` ends the stream.
 *
 * 3. Translated backend (chat): `toChat(req, { history?, resolveItem?, reasoning? })` →
 *    `{ chat, warnings, names }`. `chat` is a canonical ChatRequest (stream → include_usage on).
 *    `warnings` go to the log and a response header. `history`: the stored conversation's items for
 *    `previous_response_id` (input items + output items, oldest first). `resolveItem(id)`: the store
 *    lookup for `item_reference`. Throws GatewayError 400s (`unsupported_parameter` /
 *    `unsupported_value`) and a 404 for an unresolved item reference.
 *    Then, with `ctx: ResponseContext = { id: newResponseId(), createdAt: seconds, model: public
 *    name, request: req, names }` fixed when the request arrives:
 *    - JSON: `fromChat(completion, ctx)` → `Response`.
 *    - SSE: `const s = new ResponsesStream(ctx)`; `s.start()` (created, in_progress: may be held
 *      until `s.committed`); `s.push(chunk)` per ChatCompletionChunk; `s.finish()` at the end
 *      (completed / incomplete with usage); `s.fail({message, code?})` on a failure (response.failed
 *      before the commit point, an `error` event after it). Each returns the events as wire parts
 *      (EventPart, printed once; `sseText(part)` frames one; Responses streams have no `[DONE]`);
 *      `s.text(escaped)` turns a plain token's escaped content into its delta event directly.
 *      `s.snapshot()` is the response so far (e.g. to store after finish()).
 *
 * 4. Store (`store` ≠ false): keep the final Response and the request's input items; for the next
 *    turn's `history` pass `[...previous history, ...input items, ...response.output]`.
 *
 * Helpers: `toResponsesUsage(chatUsage)`, `responseShell(ctx)`, `statusOf(finish_reason)`,
 * `flatName(ns, fn)` / `responsesName(names, flat)` (namespace flattening `ns__fn`),
 * `unsupportedParameter(param, msg)`.
 */
export {
  parseResponsesRequest,
  responsesRequestSchema,
  MESSAGE_ROLES,
  type ResponsesRequest,
  type InputItem,
  type ContentPart,
  type MessageItem,
  type ResponsesTool,
  type ResponsesToolChoice,
  type TextFormat,
} from './schema.ts';
export { toChat, type ToChatOptions, type ToChatResult } from './to-chat.ts';
export { flatName, responsesName, unsupportedParameter, unsupportedValue, NAMESPACE_SEPARATOR, type NameMap, type ToolName } from './names.ts';
export {
  fromChat,
  newId,
  newResponseId,
  outputItems,
  responseShell,
  settle,
  statusOf,
  toResponsesUsage,
  type ResponseContext,
} from './from-chat.ts';
export { ResponsesStream, type StreamFailure } from './stream.ts';
export { echoPreviousId, echoPreviousIdInEvent } from './echo.ts';
export {
  usageFromResponse,
  usageFromEvent,
  fromResponsesUsage,
  isContentEvent,
  isContentEventType,
  isFinalEvent,
  TERMINAL_EVENTS,
  type TokenUsage,
} from './usage.ts';
export type { Response, ResponseStreamEvent, ResponseOutputItem, ResponseUsage, ResponseInputItem } from './types.ts';
