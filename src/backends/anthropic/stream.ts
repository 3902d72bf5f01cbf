/**
 * Anthropic Messages stream events → OpenAI `chat.completion.chunk`s, one by one as they arrive.
 *
 * - `message_start` → the first chunk, carrying `role: "assistant"` (and the message id and model);
 * - `text_delta` → `delta.content`; `thinking_delta` → `delta.reasoning_content`;
 * - a `tool_use` block → a `tool_calls` entry with its own `index`: `id`, `type` and `function.name`
 *   on its first delta, `input_json_delta.partial_json` fragments as `function.arguments` after
 *   (a tool call with no input gets "{}", so clients always receive parseable arguments);
 * - `message_delta` records `stop_reason` and usage; `message_stop` → the chunk with
 *   `finish_reason`, then (with include_usage) the usage chunk with `choices: []` — and, as
 *   OpenAI does, `"usage": null` on every chunk before it;
 * - `ping` and event types this version does not know are skipped; `error` throws.
 * A stream that ends before `message_stop` ends without a finish_reason: the router reports it as
 * truncated instead of a clean end.
 */
import { z } from 'zod';
import type { ChatCompletionChunk } from '../../protocol/chat/schema.ts';
import { upstreamMalformed } from '../../errors/upstream.ts';
import {
  anthropicBlockSchema,
  anthropicUsageSchema,
  mergeUsage,
  streamError,
  toFinishReason,
  toOpenAIUsage,
  type AnthropicUsage,
} from './response.ts';

const messageStart = z.looseObject({
  message: z.looseObject({ id: z.string(), model: z.string(), usage: anthropicUsageSchema.nullish() }),
});
const blockStart = z.looseObject({ index: z.int(), content_block: anthropicBlockSchema });
const blockDelta = z.looseObject({
  index: z.int(),
  delta: z.looseObject({ type: z.string(), text: z.string().optional(), partial_json: z.string().optional(), thinking: z.string().optional() }),
});
const blockStop = z.looseObject({ index: z.int() });
const messageDelta = z.looseObject({
  delta: z.looseObject({ stop_reason: z.string().nullish() }),
  usage: anthropicUsageSchema.nullish(),
});
const errorEvent = z.looseObject({ error: z.looseObject({ type: z.unknown(), message: z.unknown() }).nullish() });

export interface StreamOptions {
  backend: string;
  /** Values to scrub from upstream error messages. */
  secrets: ReadonlyArray<string>;
  /**
   * As OpenAI does with stream_options.include_usage: `"usage": null` on every ordinary chunk and
   * the final usage chunk (`choices: []`).
   */
  includeUsage: boolean;
  now?: () => number;
}

type Delta = ChatCompletionChunk['choices'][number]['delta'] & { reasoning_content?: string };
type Choice = ChatCompletionChunk['choices'][number];

interface BlockState {
  kind: 'text' | 'thinking' | 'tool' | 'other';
  /** OpenAI tool_calls index (tool blocks only). */
  tool: number;
  /** Whether any argument text was sent for this tool call. */
  args: boolean;
}

export async function* toChatChunks(events: AsyncIterable<unknown>, o: StreamOptions): AsyncGenerator<ChatCompletionChunk> {
  const created = Math.floor((o.now ?? Date.now)() / 1000);
  let id = '';
  let model = '';
  let started = false;
  let finished = false;
  let stopReason: string | null | undefined;
  let usage: AnthropicUsage = {};
  let tools = 0;
  const blocks = new Map<number, BlockState>();

  // With include_usage every chunk but the usage chunk carries `"usage": null`, as OpenAI's do.
  const chunk = (delta: Delta, finish: Choice['finish_reason'] = null): ChatCompletionChunk => {
    const c: ChatCompletionChunk = { id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] };
    if (o.includeUsage) c.usage = null;
    return c;
  };
  const parse = <S extends z.ZodType>(schema: S, ev: unknown, type: string): z.infer<S> => {
    const r = schema.safeParse(ev);
    if (!r.success) throw upstreamMalformed(o.backend, `invalid "${type}" stream event`);
    if (type !== 'message_start' && !started) throw upstreamMalformed(o.backend, `"${type}" stream event before "message_start"`);
    return r.data;
  };

  for await (const ev of events) {
    const type = typeof ev === 'object' && ev !== null && 'type' in ev ? ev.type : undefined;
    if (finished) continue; // read to the end so the connection can be reused
    switch (type) {
      case 'message_start': {
        if (started) throw upstreamMalformed(o.backend, 'a second "message_start" stream event');
        const { message } = parse(messageStart, ev, type);
        ({ id, model } = message);
        usage = mergeUsage(usage, message.usage);
        started = true;
        yield chunk({ role: 'assistant', content: '' });
        break;
      }
      case 'content_block_start': {
        const { index, content_block: b } = parse(blockStart, ev, type);
        if (b.type === 'tool_use' && b.id !== undefined && b.name !== undefined) {
          const state: BlockState = { kind: 'tool', tool: tools++, args: false };
          blocks.set(index, state);
          // Some proxies send the whole input here instead of as input_json_delta fragments.
          const initial = b.input && typeof b.input === 'object' && Object.keys(b.input).length > 0 ? JSON.stringify(b.input) : '';
          state.args = initial !== '';
          yield chunk({ tool_calls: [{ index: state.tool, id: b.id, type: 'function', function: { name: b.name, arguments: initial } }] });
        } else if (b.type === 'text' || b.type === 'thinking') {
          blocks.set(index, { kind: b.type, tool: -1, args: false });
          if (b.type === 'text' && b.text) yield chunk({ content: b.text });
          if (b.type === 'thinking' && b.thinking) yield chunk({ reasoning_content: b.thinking });
        } else blocks.set(index, { kind: 'other', tool: -1, args: false });
        break;
      }
      case 'content_block_delta': {
        const { index, delta: d } = parse(blockDelta, ev, type);
        const state = blocks.get(index);
        if (!state) break;
        if (d.type === 'text_delta' && state.kind === 'text' && d.text) yield chunk({ content: d.text });
        else if (d.type === 'thinking_delta' && state.kind === 'thinking' && d.thinking) yield chunk({ reasoning_content: d.thinking });
        else if (d.type === 'input_json_delta' && state.kind === 'tool' && d.partial_json) {
          state.args = true;
          yield chunk({ tool_calls: [{ index: state.tool, function: { arguments: d.partial_json } }] });
        }
        // signature_delta, citations_delta and future delta types carry nothing OpenAI clients read.
        break;
      }
      case 'content_block_stop': {
        const { index } = parse(blockStop, ev, type);
        const state = blocks.get(index);
        if (state?.kind === 'tool' && !state.args) {
          state.args = true;
          yield chunk({ tool_calls: [{ index: state.tool, function: { arguments: '{}' } }] });
        }
        break;
      }
      case 'message_delta': {
        const md = parse(messageDelta, ev, type);
        if (md.delta.stop_reason !== undefined && md.delta.stop_reason !== null) stopReason = md.delta.stop_reason;
        usage = mergeUsage(usage, md.usage);
        break;
      }
      case 'message_stop': {
        parse(z.looseObject({}), ev, type);
        finished = true;
        yield chunk({}, toFinishReason(stopReason));
        if (o.includeUsage) yield { id, object: 'chat.completion.chunk', created, model, choices: [], usage: toOpenAIUsage(usage) };
        break;
      }
      case 'error': {
        const r = errorEvent.safeParse(ev);
        const err = r.success ? r.data.error : undefined;
        throw streamError(o.backend, err?.type, err?.message, o.secrets);
      }
      default:
        // `ping` and event types added after this version: nothing to translate.
        break;
    }
  }
}
