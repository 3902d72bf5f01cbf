/**
 * The OpenAI Responses API (`POST /v1/responses`) as pure protocol functions. How the HTTP route
 * and the gateway use them, and the mapping table for translated backends: ./README.md.
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
export { StreamFromChat, type StreamFailure } from './stream.ts';
export {
  usageOf,
  usageFromEvent,
  fromResponsesUsage,
  isContentEvent,
  isContentEventType,
  isFinalEvent,
  TERMINAL_EVENTS,
  type TokenUsage,
} from './usage.ts';
export type { Response, ResponseStreamEvent, ResponseOutputItem, ResponseUsage, ResponseInputItem } from './types.ts';
export { responsesProtocol, responsesTurn, type ResponsesConversation, type ResponsesTurn } from './adapter.ts';
