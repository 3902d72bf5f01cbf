/**
 * The wire types of the Responses API, from the installed openai SDK (authoritative for field names
 * and shapes). Protocol code builds these; nothing here is runtime.
 */
export type {
  Response,
  ResponseCreateParams,
  ResponseInputItem,
  ResponseOutputItem,
  ResponseOutputMessage,
  ResponseFunctionToolCall,
  ResponseCustomToolCall,
  ResponseReasoningItem,
  ResponseStreamEvent,
  ResponseUsage,
  ResponseError,
} from 'openai/resources/responses/responses';
