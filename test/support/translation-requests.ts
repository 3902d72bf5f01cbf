/**
 * Each ingress's request body for a generated prompt: a system text, the user text (a string or
 * one text part), an earlier tool call with its result, and the tools the answer calls offered.
 */
import type { Ingress, Prompt } from './translation-arbitraries.ts';
import type { ScriptedAnswer } from './scripted-wire.ts';
import type { Json } from './translation-client.ts';

/** Tool names offered to the model: the earlier call's and the answer's. */
function toolNames(p: Prompt, a: ScriptedAnswer): string[] {
  return [...new Set([...(p.history ? [p.history.name] : []), ...a.tools.map((t) => t.name)])];
}

export function requestBody(ingress: Ingress, model: string, p: Prompt, a: ScriptedAnswer, stream: boolean): Json {
  const h = p.history;
  const names = toolNames(p, a);
  const schema = { type: 'object' };
  /** a text as the protocol's one text part, or the string itself */
  const part = (text: string, type = 'text'): unknown => (p.parts ? [{ type, text }] : text);
  switch (ingress) {
    case 'chat': {
      const messages: Json[] = [];
      if (p.system !== '') messages.push({ role: 'system', content: p.system });
      messages.push({ role: 'user', content: part(p.user) });
      if (h) {
        messages.push({ role: 'assistant', content: null, tool_calls: [{ id: h.id, type: 'function', function: { name: h.name, arguments: h.args } }] });
        messages.push({ role: 'tool', tool_call_id: h.id, content: part(h.result) });
      }
      const body: Json = { model, messages, stream };
      if (names.length > 0) body['tools'] = names.map((name) => ({ type: 'function', function: { name, parameters: schema } }));
      if (stream) body['stream_options'] = { include_usage: true };
      return body;
    }
    case 'completions': {
      const body: Json = { model, prompt: p.user, max_tokens: 256, stream };
      if (stream) body['stream_options'] = { include_usage: true };
      return body;
    }
    case 'responses': {
      const input: Json[] = [{ role: 'user', content: part(p.user, 'input_text') }];
      if (h) input.push({ type: 'function_call', call_id: h.id, name: h.name, arguments: h.args }, { type: 'function_call_output', call_id: h.id, output: part(h.result, 'input_text') });
      const body: Json = { model, input, stream, store: true };
      if (p.system !== '') body['instructions'] = p.system;
      if (names.length > 0) body['tools'] = names.map((name) => ({ type: 'function', name, parameters: schema }));
      return body;
    }
    case 'messages': {
      const messages: Json[] = [{ role: 'user', content: part(p.user) }];
      if (h) {
        messages.push({ role: 'assistant', content: [{ type: 'tool_use', id: h.id, name: h.name, input: JSON.parse(h.args) as unknown }] });
        messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: h.id, content: part(h.result) }] });
      }
      const body: Json = { model, max_tokens: 1024, messages, stream };
      if (p.system !== '') body['system'] = p.system;
      if (names.length > 0) body['tools'] = names.map((name) => ({ name, input_schema: schema }));
      return body;
    }
    default: {
      const never: never = ingress;
      throw new Error(`unknown ingress ${String(never)}`);
    }
  }
}

export const PATHS: Record<Ingress, string> = { chat: '/v1/chat/completions', completions: '/v1/completions', responses: '/v1/responses', messages: '/v1/messages' };
