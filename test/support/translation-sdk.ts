/**
 * The vendor SDKs' stream accumulators as clients of the translation properties: the openai SDK's
 * `chat.completions.stream(…).finalChatCompletion()` and `responses.stream(…).finalResponse()`, and
 * the Anthropic SDK's `messages.stream(…).finalMessage()`, each read into `Observed` like a raw
 * answer (names prefixed `sdk`), so the same checks apply to what an application actually sees.
 */
import Anthropic from '@anthropic-ai/sdk';
import type { MessageCreateParamsStreaming } from '@anthropic-ai/sdk/resources/messages';
import OpenAI from 'openai';
import type { ChatCompletionStreamParams } from 'openai/lib/ChatCompletionStream';
import type { ResponseStreamParams } from 'openai/lib/responses/ResponseStream';
import type { Ingress } from './translation-arbitraries.ts';
import { emptyObserved, readMessage, readResponse, type Json, type Observed } from './translation-client.ts';

export interface SdkClients {
  openai: OpenAI;
  anthropic: Anthropic;
}

export function sdkClients(gatewayUrl: string): SdkClients {
  return {
    openai: new OpenAI({ baseURL: `${gatewayUrl}/v1`, apiKey: 'sk-unused', maxRetries: 0 }),
    anthropic: new Anthropic({ baseURL: gatewayUrl, apiKey: 'sk-ant-unused', maxRetries: 0 }),
  };
}

/** Round-trips a value through JSON: SDK objects as the plain records the readers take. */
const plain = (v: unknown): Json => JSON.parse(JSON.stringify(v)) as Json;

/** Streams `body` (a request body of `ingress`, `stream: true`) through the SDK; undefined for ingresses with no accumulator. */
export async function readWithSdk(c: SdkClients, ingress: Ingress, body: Json): Promise<Observed | undefined> {
  const o = emptyObserved();
  switch (ingress) {
    case 'chat': {
      const final = await c.openai.chat.completions.stream(body as unknown as ChatCompletionStreamParams).finalChatCompletion();
      const choice = final.choices[0];
      o.texts.push(['sdk finalChatCompletion content', choice?.message.content ?? '']);
      const calls = choice?.message.tool_calls ?? [];
      o.tools.push(['sdk finalChatCompletion tool_calls', calls.map((t) => (t.type === 'function' ? { id: t.id, name: t.function.name, args: t.function.arguments } : { id: t.id, name: '', args: '' }))]);
      o.stops.push(['sdk finish_reason', choice?.finish_reason]);
      if (final.usage) {
        const u = final.usage;
        o.usages.push(['sdk usage', { input: u.prompt_tokens, output: u.completion_tokens, total: u.total_tokens, cached: u.prompt_tokens_details?.cached_tokens ?? 0 }]);
      }
      return o;
    }
    case 'responses': {
      const final = await c.openai.responses.stream(body as unknown as ResponseStreamParams).finalResponse();
      readResponse('sdk finalResponse', plain(final), o);
      o.texts.push(['sdk output_text', final.output_text]);
      return o;
    }
    case 'messages': {
      const final = await c.anthropic.messages.stream(body as unknown as MessageCreateParamsStreaming).finalMessage();
      readMessage('sdk finalMessage', plain(final), o);
      return o;
    }
    case 'completions':
      return undefined;
    default: {
      const never: never = ingress;
      throw new Error(`unknown ingress ${String(never)}`);
    }
  }
}
