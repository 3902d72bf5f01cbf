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
