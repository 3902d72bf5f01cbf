/**
 * Canonical chat stream (chat.completion.chunk objects) → Anthropic's stream events, in the order
 * the API sends them:
 *
 *   message_start · (content_block_start · content_block_delta* · content_block_stop)* ·
 *   message_delta (stop_reason, stop_sequence, usage) · message_stop
 *
 * - One block is open at a time, indexes 0, 1, 2 …: reasoning (`reasoning_content`, or
 *   `reasoning`) → a `thinking` block with `thinking_delta`s and, before its content_block_stop,
 *   one `signature_delta` with the gateway's signature of its text (signature.ts); `content` (and
 *   `refusal`) → a `text` block with `text_delta`s; each chat tool call (by its `index`) → a
 *   `tool_use` block opened when its name is known, its argument fragments as `input_json_delta`s.
 *   A change of kind closes the open block and opens the next; text after a tool call opens a new
 *   text block.
 * - A fragment for a tool call whose block was already closed (a backend interleaving parallel
 *   calls) cannot be sent: it is dropped with a warning.
 * - message_start carries `usage.input_tokens` from `inputTokens` (the gateway's estimate) or 0;
 *   message_delta carries the backend's final usage (input, output, cache) when it reported one.
 * - `fail(err)` ends the stream with an `error` event (after the commit point); nothing follows it.
 *
 * Every method returns the events to write, in order; `sse()` frames one.
 */
import type { ChatCompletionChunk } from '../chat/schema.ts';
import type { GatewayError } from '../../errors/gateway-error.ts';
import { errorEvent, type AnthropicErrorType } from './errors.ts';
import {
  matchedStop,
  messageId,
  toMessagesUsage,
  toolUseId,
  toStopReason,
  type MessagesMessage,
  type MessagesUsage,
  type StopReason,
} from './from-chat.ts';

import { EventPart, type PartUsage } from '../stream-part.ts';
import type { StreamTranslator } from '../client-protocol.ts';
import { isContentEvent } from './usage.ts';
import { ThinkingSigner } from './signature.ts';

export { sse } from './sse.ts';

type StartBlock =
  | { type: 'text'; text: '' }
  | { type: 'thinking'; thinking: ''; signature: '' }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, never> };

type Delta =
  | { type: 'text_delta'; text: string }
  | { type: 'thinking_delta'; thinking: string }
  | { type: 'input_json_delta'; partial_json: string }
  | { type: 'signature_delta'; signature: string };

export type MessagesStreamEvent =
  | { type: 'message_start'; message: MessagesMessage }
  | { type: 'content_block_start'; index: number; content_block: StartBlock }
  | { type: 'content_block_delta'; index: number; delta: Delta }
  | { type: 'content_block_stop'; index: number }
  | {
      type: 'message_delta';
      delta: { stop_reason: StopReason; stop_sequence: string | null; stop_details: null };
      usage: Partial<MessagesUsage> & { output_tokens: number };
    }
  | { type: 'message_stop' }
  | { type: 'ping' }
  | { type: 'error'; error: { type: AnthropicErrorType; message: string } };

export interface StreamOptions {
  /** The public model name the client asked for. */
  model: string;
  /** The message id; default: `msg_…` from the first chunk's id (or random when start() comes first). */
  id?: string | undefined;
  /** The request's stop_sequences, to report which one matched when the backend says so. */
  stopSequences?: readonly string[] | null | undefined;
  /** message_start's usage.input_tokens (the gateway's prompt estimate); default 0. */
  inputTokens?: number | undefined;
  /** Leave reasoning out instead of sending thinking blocks. */
  omitThinking?: boolean | undefined;
}

interface ToolState {
  state: 'pending' | 'open' | 'closed';
  id: string | undefined;
  name: string | undefined;
  /** Argument text received before the name was known. */
  buffered: string;
  block: number;
}

type ChunkDelta = ChatCompletionChunk['choices'][number]['delta'] & { reasoning_content?: unknown; reasoning?: unknown };

export class EventsFromChat {
  private started = false;
  private ended = false;
  private id: string | undefined;
  private next = 0;
  private open: { kind: 'text' | 'thinking' | 'tool'; index: number; tool?: ToolState; signer?: ThinkingSigner } | undefined;
  private readonly tools = new Map<number, ToolState>();
  private finishReason: string | null = null;
  private stopSequence: string | null = null;
  private refused = false;
  private sawTool = false;
  private chatUsage: ChatCompletionChunk['usage'] | undefined;
  private readonly notes: string[] = [];

  constructor(private readonly o: StreamOptions) {
    this.id = o.id;
  }

  /** What was dropped or repaired on the way (for the request's log line). */
  get warnings(): readonly string[] {
    return this.notes;
  }

  /** The final usage in Anthropic's terms (zeros until the backend reports it). */
  get usage(): MessagesUsage {
    return toMessagesUsage(this.chatUsage);
  }

  /** message_start (once). */
  start(): MessagesStreamEvent[] {
    if (this.started || this.ended) return [];
    this.started = true;
    this.id ??= messageId(undefined);
    const message: MessagesMessage = {
      id: this.id,
      type: 'message',
      role: 'assistant',
      model: this.o.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      stop_details: null,
      container: null,
      usage: { input_tokens: this.o.inputTokens ?? 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    };
    return [{ type: 'message_start', message }];
  }

  ping(): MessagesStreamEvent {
    return { type: 'ping' };
  }

  push(chunk: ChatCompletionChunk): MessagesStreamEvent[] {
    if (this.ended) return [];
    if (this.id === undefined) this.id = messageId(chunk.id);
    const out = this.start();
    if (chunk.usage) this.chatUsage = chunk.usage;
    const choice = chunk.choices.find((c) => c.index === 0) ?? chunk.choices[0];
    if (!choice) return out;
    const d = (choice.delta ?? {}) as ChunkDelta;
    const reasoning = typeof d.reasoning_content === 'string' ? d.reasoning_content : typeof d.reasoning === 'string' ? d.reasoning : '';
    if (reasoning !== '' && this.o.omitThinking !== true) {
      this.ensure('thinking', out);
      this.open?.signer?.update(reasoning);
      out.push({ type: 'content_block_delta', index: this.next - 1, delta: { type: 'thinking_delta', thinking: reasoning } });
    }
    if (typeof d.content === 'string') this.content(d.content, false, out);
    if (typeof d.refusal === 'string') this.content(d.refusal, true, out);
    for (const tc of d.tool_calls ?? []) this.toolDelta(tc, out);
    if (choice.finish_reason) {
      this.finishReason = choice.finish_reason;
      this.stopSequence = matchedStop(choice, this.o.stopSequences);
    }
    return out;
  }

  /** The index of the open text block, if a text block is open. */
  get textBlock(): number | undefined {
    return !this.ended && this.open?.kind === 'text' ? this.open.index : undefined;
  }

  /** The events of a chunk whose delta is only this `content` text. */
  pushText(text: string): MessagesStreamEvent[] {
    if (this.ended) return [];
    const out = this.start();
    this.content(text, false, out);
    return out;
  }

  /** The clean end: closes the open block, then message_delta and message_stop. */
  finish(): MessagesStreamEvent[] {
    if (this.ended) return [];
    const out = this.start();
    for (const [i, t] of this.tools) {
      if (t.state === 'pending') this.notes.push(`tool call ${i}: no name received; left out`);
    }
    this.close(out);
    this.ended = true;
    const stop: StopReason =
      this.refused && this.finishReason !== 'length' ? 'refusal' : toStopReason(this.finishReason, this.sawTool, this.stopSequence);
    const usage: Extract<MessagesStreamEvent, { type: 'message_delta' }>['usage'] = this.chatUsage
      ? { ...this.usage }
      : { output_tokens: 0 };
    out.push(
      { type: 'message_delta', delta: { stop_reason: stop, stop_sequence: stop === 'stop_sequence' ? this.stopSequence : null, stop_details: null }, usage },
      { type: 'message_stop' },
    );
    return out;
  }

  /** The end after a failure past the commit point: one `error` event; nothing follows it. */
  fail(err: GatewayError): MessagesStreamEvent[] {
    if (this.ended) return [];
    this.ended = true;
    return [errorEvent(err)];
  }

  /** Content or refusal text: a text_delta in the open text block (opened when needed). */
  private content(text: string, refusal: boolean, out: MessagesStreamEvent[]): void {
    if (text === '') return;
    if (refusal) this.refused = true;
    this.ensure('text', out);
    out.push({ type: 'content_block_delta', index: this.next - 1, delta: { type: 'text_delta', text } });
  }

  private close(out: MessagesStreamEvent[]): void {
    if (!this.open) return;
    // Anthropic's order: the thinking block's signature_delta right before its content_block_stop
    if (this.open.signer) out.push({ type: 'content_block_delta', index: this.open.index, delta: { type: 'signature_delta', signature: this.open.signer.digest() } });
    out.push({ type: 'content_block_stop', index: this.open.index });
    if (this.open.tool) this.open.tool.state = 'closed';
    this.open = undefined;
  }

  /** Makes a text or thinking block the open one. */
  private ensure(kind: 'text' | 'thinking', out: MessagesStreamEvent[]): void {
    if (this.open?.kind === kind) return;
    this.close(out);
    const index = this.next++;
    this.open = kind === 'thinking' ? { kind, index, signer: new ThinkingSigner() } : { kind, index };
    const content_block: StartBlock = kind === 'text' ? { type: 'text', text: '' } : { type: 'thinking', thinking: '', signature: '' };
    out.push({ type: 'content_block_start', index, content_block });
  }

  private toolDelta(tc: NonNullable<ChunkDelta['tool_calls']>[number], out: MessagesStreamEvent[]): void {
    let t = this.tools.get(tc.index);
    if (!t) {
      t = { state: 'pending', id: undefined, name: undefined, buffered: '', block: -1 };
      this.tools.set(tc.index, t);
    }
    if (tc.id && t.id === undefined) t.id = tc.id;
    if (tc.function?.name && t.name === undefined) t.name = tc.function.name;
    const args = tc.function?.arguments ?? '';
    if (t.state === 'closed') {
      if (args !== '') this.notes.push(`tool call ${tc.index}: arguments after its block closed were dropped`);
      return;
    }
    if (t.state === 'pending') {
      t.buffered += args;
      if (t.name === undefined) return;
      this.close(out);
      t.state = 'open';
      t.block = this.next++;
      this.open = { kind: 'tool', index: t.block, tool: t };
      this.sawTool = true;
      out.push({ type: 'content_block_start', index: t.block, content_block: { type: 'tool_use', id: toolUseId(t.id), name: t.name, input: {} } });
      if (t.buffered !== '') out.push({ type: 'content_block_delta', index: t.block, delta: { type: 'input_json_delta', partial_json: t.buffered } });
      t.buffered = '';
      return;
    }
    if (args !== '') out.push({ type: 'content_block_delta', index: t.block, delta: { type: 'input_json_delta', partial_json: args } });
  }
}

/** An event as a wire part: content from the first content block on, final at message_stop. */
export function messagesEventPart(ev: MessagesStreamEvent): EventPart {
  return new EventPart(ev.type, printEvent(ev), isContentEvent(ev), ev.type === 'message_stop', true);
}

/** An event's JSON: the fixed shapes every text answer has from templates, the rest printed. */
export function printEvent(ev: MessagesStreamEvent): string {
  switch (ev.type) {
    case 'content_block_stop':
      return `{"type":"content_block_stop","index":${ev.index}}`;
    case 'message_stop':
      return '{"type":"message_stop"}';
    case 'content_block_start':
      if (ev.content_block.type === 'text') return `{"type":"content_block_start","index":${ev.index},"content_block":{"type":"text","text":""}}`;
      break;
    case 'content_block_delta':
      if (ev.delta.type === 'text_delta') return `{"type":"content_block_delta","index":${ev.index},"delta":{"type":"text_delta","text":${JSON.stringify(ev.delta.text)}}}`;
      break;
    default:
      // message_start, message_delta, ping and error vary in shape: printed whole below.
      break;
  }
  return JSON.stringify(ev);
}

/**
 * An EventsFromChat as wire parts, for the gateway's translated streams: each event printed
 * once; an ordinary token's text_delta written from the chunk's escaped content (text()) without
 * an object. `onFinish` runs after the closing events are made (the route reads the warnings).
 */
export class StreamFromChat implements StreamTranslator {
  constructor(
    private readonly conv: EventsFromChat,
    private readonly onFinish?: () => void,
  ) {}

  start(): EventPart[] {
    return this.conv.start().map(messagesEventPart);
  }

  push(chunk: ChatCompletionChunk): EventPart[] {
    return this.conv.push(chunk).map(messagesEventPart);
  }

  /** A token's content, still JSON-escaped (protocol/chat/content-text.ts): its events appended to `out`. */
  text(escaped: string, out: EventPart[]): void {
    const block = this.conv.textBlock;
    if (block === undefined || escaped === '') {
      for (const ev of this.conv.pushText(JSON.parse(`"${escaped}"`) as string)) out.push(messagesEventPart(ev));
      return;
    }
    out.push(new EventPart('content_block_delta', `{"type":"content_block_delta","index":${block},"delta":{"type":"text_delta","text":"${escaped}"}}`, true, false, true));
  }

  /** The closing events; `usage` (the gateway's reading of the stream) on the last. */
  finish(usage?: PartUsage): EventPart[] {
    const parts = this.conv.finish().map(messagesEventPart);
    const last = parts.at(-1);
    if (last) last.usage = usage;
    this.onFinish?.();
    return parts;
  }
}
