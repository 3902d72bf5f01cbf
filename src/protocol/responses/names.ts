/**
 * Tool names between the Responses API and chat: namespaced tools flattened to `ns__fn` (bounded
 * to chat's 64 characters with a hash suffix) and back; and the 400s a translation answers with.
 */
import { GatewayError } from '../../errors/gateway-error.ts';

/** The Responses name of a chat tool: `namespace` set for a flattened namespaced tool. */
export interface ToolName {
  name: string;
  namespace?: string;
}

/** Flat chat tool name → the Responses name, for namespaced tools only. */
export type NameMap = ReadonlyMap<string, ToolName>;

export const NAMESPACE_SEPARATOR = '__';
/** OpenAI's limit on a chat function name. */
const MAX_NAME = 64;

export function unsupportedParameter(param: string, message: string): GatewayError {
  return new GatewayError('unsupported_parameter', message, { param });
}

export function unsupportedValue(param: string, message: string): GatewayError {
  return new GatewayError('unsupported_value', message, { param });
}

function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

/** `ns__fn`, or, past 64 characters, its first 55 and a hash (still reversed by the name map). */
export function flatName(namespace: string, name: string): string {
  const flat = `${namespace}${NAMESPACE_SEPARATOR}${name}`;
  if (flat.length <= MAX_NAME) return flat;
  return `${flat.slice(0, MAX_NAME - 9)}_${fnv1a(flat)}`;
}

/** The Responses name of a chat tool call's name. */
export function responsesName(names: NameMap | undefined, flat: string): ToolName {
  return names?.get(flat) ?? { name: flat };
}
