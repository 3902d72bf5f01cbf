/**
 * Anthropic Messages API as an ingress (`POST /v1/messages`, `POST /v1/messages/count_tokens`):
 * the protocol layer, pure functions only. The HTTP route, the gateway and the backends plug in as
 * below. What maps to what for translated backends: README.md beside this file.
 *
 * Request
 *   parseMessagesRequest(body) → MessagesRequest      throws GatewayError 400 naming the field
 *   parseCountTokensRequest(body) → CountTokensRequest  same, max_tokens not required
 *   The parsed object IS the client's body (no transforms): a native backend forwards it with only
 *   `model` replaced.
 *
 * Translated backends (every type but `anthropic`)
 *   messagesToChat(req, { reasoningContent?, topK? }) → { chat: ChatRequest, warnings: string[] }
 *     reasoningContent: true for llama-server (history thinking → reasoning_content).
 *     Throws 400 (code "unsupported") only for URL / Files-API documents and file images.
 *     `chat.stream` + `stream_options.include_usage` are set when the client streams.
 *   chatToMessage(completion, { model: publicName, stopSequences: req.stop_sequences }) → { message, warnings }
 *   new ChatToMessagesStream({ model: publicName, stopSequences, inputTokens?, id? })
 *     .start()          → [message_start]      (push() starts on its own if start() was not called)
 *     .push(chunk)      → events for one chat chunk
 *     .finish()         → [content_block_stop?, message_delta, message_stop]   on a clean end
 *     .fail(err)        → [error]              after the commit point; nothing follows
 *     .ping()           → ping                 for a keep-alive timer
 *     .usage / .warnings
 *   new MessagesStreamParts(conv, onFinish?) → the same events as wire parts (EventPart) for the
 *     gateway; .text(escaped, out) writes a plain token's text_delta from its escaped content
 *   sse(event) → "event: <type>\ndata: <json>\n\n"
 *
 * Thinking signatures (signature.ts)
 *   Translated thinking blocks carry gatewaySignature(text) = `swy1.` + base64url(SHA-256(text));
 *   streams send it as a signature_delta before the block's content_block_stop.
 *   withoutGatewayThinking(body) → { body, dropped }: the history without gateway-signed thinking
 *     blocks, for Anthropic (which refuses signatures it did not make); the same body when none.
 *
 * Native backends (`anthropic`: bytes passed through)
 *   usageFromMessage(jsonBody) → NativeUsage | undefined
 *   new NativeUsageReader().add(parsedEvent) for events named in USAGE_EVENTS; .usage at the end
 *   isContentEvent(eventName | event) → true at the first content_block_start/_delta: the commit point
 *   NativeUsage = { prompt_tokens, completion_tokens, total_tokens,
 *                   prompt_tokens_details: { cached_tokens, cache_creation_tokens } }
 *     (prompt_tokens includes both cache counts, as the Anthropic backend's chat usage does)
 *
 * count_tokens on a non-native backend
 *   messagesPrompt(req) → { texts, fixed }   with the gateway's async TokenCounter:
 *     fixed + await counter.count(encoding, texts)
 *   countInputTokens(req, tokenize) with a synchronous tokenizer; countTokensResponse(n) → { input_tokens }
 *   Both are estimates (README.md says how they are made).
 *
 * Errors (only this writes Anthropic's envelope)
 *   anthropicErrorResponse(err, requestId?) → { status, headers, body }   503 → 529 overloaded_error
 *   toAnthropicError(err, requestId?), anthropicStatus(err), anthropicErrorType(err)
 *   errorEvent(err) / errorFrame(err) → the mid-stream `error` event / its SSE frame
 */
export {
  countTokensRequestSchema,
  messagesRequestSchema,
  parseCountTokensRequest,
  parseMessagesRequest,
  type CountTokensRequest,
  type MessagesRequest,
} from './schema.ts';
export { messagesToChat, TOOL_ERROR_PREFIX, type ToChat, type ToChatOptions } from './to-chat.ts';
export {
  chatToMessage,
  toMessagesUsage,
  toStopReason,
  type FromChat,
  type FromChatOptions,
  type MessageContentBlock,
  type MessagesMessage,
  type MessagesUsage,
  type StopReason,
} from './from-chat.ts';
export { ChatToMessagesStream, MessagesStreamParts, messagesEventPart, type MessagesStreamEvent, type StreamOptions } from './stream.ts';
export { sse } from './sse.ts';
export { gatewaySignature, GATEWAY_SIGNATURE_PREFIX, gatewayThinkingCount, isGatewaySignature, ThinkingSigner, withoutGatewayThinking } from './signature.ts';
export { isContentEvent, NativeUsageReader, USAGE_EVENTS, usageFromMessage, type NativeUsage } from './usage.ts';
export { countInputTokens, countTokensResponse, messagesPrompt, type Prompt } from './count-tokens.ts';
export {
  anthropicErrorResponse,
  anthropicErrorType,
  anthropicStatus,
  errorEvent,
  errorFrame,
  toAnthropicError,
  type AnthropicErrorBody,
  type AnthropicErrorResponse,
  type AnthropicErrorType,
} from './errors.ts';
