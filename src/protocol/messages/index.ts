/**
 * Anthropic Messages API as an ingress (`POST /v1/messages`, `POST /v1/messages/count_tokens`):
 * the protocol layer, pure functions only. How the HTTP route, the gateway and the backends use
 * them, and what maps to what for translated backends: README.md beside this file.
 */
export {
  countTokensRequestSchema,
  messagesRequestSchema,
  parseCountTokensRequest,
  parseMessagesRequest,
  type CountTokensRequest,
  type MessagesRequest,
} from './schema.ts';
export { toChat, TOOL_ERROR_PREFIX, type ToChatResult, type ToChatOptions } from './to-chat.ts';
export {
  fromChat,
  toMessagesUsage,
  toStopReason,
  type FromChatResult,
  type FromChatOptions,
  type MessageContentBlock,
  type MessagesMessage,
  type MessagesUsage,
  type StopReason,
} from './from-chat.ts';
export { EventsFromChat, StreamFromChat, messagesEventPart, type MessagesStreamEvent, type StreamOptions } from './stream.ts';
export { sse } from './sse.ts';
export { gatewaySignature, GATEWAY_SIGNATURE_PREFIX, gatewayThinkingCount, isGatewaySignature, ThinkingSigner, withoutGatewayThinking } from './signature.ts';
export { isContentEvent, NativeUsageReader, USAGE_EVENTS, usageOf, type NativeUsage } from './usage.ts';
export { countInputTokens, countTokensResponse, promptOf, type Prompt } from './count-tokens.ts';
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
export { messagesProtocol, messagesTurn, toChatOptionsFor, type MessagesTurn } from './adapter.ts';
