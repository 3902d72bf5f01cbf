/**
 * Canonical chat stream (ChatCompletionChunk…) → Responses stream events, in OpenAI's order:
 *
 *   response.created, response.in_progress                                       start()
 *   per output item, one at a time (an item is done before the next is added):
 *     reasoning: output_item.added, reasoning_summary_part.added,
 *                reasoning_summary_text.delta…, reasoning_summary_text.done,
 *                reasoning_summary_part.done, output_item.done
 *     message:   output_item.added, content_part.added, output_text.delta…,
 *                output_text.done, content_part.done (a refusal part likewise with
 *                refusal.delta / refusal.done), output_item.done
 *     function_call: output_item.added, function_call_arguments.delta…, .done, output_item.done
 *     custom_tool_call: output_item.added, custom_tool_call_input.delta…, .done, output_item.done
 *   response.completed | response.incomplete (full response, usage)              finish()
 *
 * Every event has `type` and a `sequence_number` rising from 0. Chat `reasoning_content` (or
 * `reasoning`) becomes a reasoning item with one summary part, as fromChat does.
 *
 * Commit point: `committed` turns true with the first output item (push() returns its events).
 * The caller may hold start()'s events back until then, so a failure before it can still fail over.
 * fail(): before the commit point `response.failed` (status "failed", `error` set); after it an
 * `error` event, OpenAI's report of a stream that broke mid-answer. Either ends the stream.
 */
import type { ChatCompletionChunk } from '../chat/schema.ts';
import { newId, responseShell, settle, statusOf, toResponsesUsage, type ResponseContext } from './from-chat.ts';
import { responsesName } from './names.ts';
import type { Response, ResponseOutputItem, ResponseStreamEvent } from './types.ts';

/** One SSE frame as OpenAI writes it: `event:` line, `data:` line, blank line. No `[DONE]`. */
export function sse(event: { type: string }): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

export interface StreamFailure {
  message: string;
  /** e.g. `server_error`, `rate_limit_exceeded`. */
  code?: string | null;
  param?: string | null;
}

type Event = ResponseStreamEvent;
type Json = Record<string, unknown>;

interface ToolDelta {
  index: number;
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
  custom?: { name?: string; input?: string };
}
type Delta = {
  content?: string | null;
  refusal?: string | null;
  reasoning_content?: string | null;
  reasoning?: string | null;
  tool_calls?: ToolDelta[] | null;
};

type Open =
  | { kind: 'reasoning'; index: number; id: string; text: string }
  | { kind: 'message'; index: number; id: string; parts: Array<{ type: 'output_text' | 'refusal'; text: string }>; open: boolean }
  | { kind: 'call'; index: number; id: string; chatIndex: number; custom: boolean; callId: string; name: string; args: string };

export class ResponsesStream {
  private seq = 0;
  private readonly output: ResponseOutputItem[] = [];
  private current: Open | undefined;
  /** chat tool-call index → its item, for deltas of calls already closed */
  private readonly calls = new Map<number, Extract<Open, { kind: 'call' }>>();
  private finishReason: string | null = null;
  private usage: ChatCompletionChunk['usage'] = null;
  private started = false;
  private ended = false;
  /** true once an output item was emitted: the client has content. */
  committed = false;

  constructor(private readonly ctx: ResponseContext) {}

  /** The response as it stands (status in_progress until finish()). */
  snapshot(): Response {
    const r = responseShell(this.ctx);
    r.output = structuredClone(this.output);
    return r;
  }

  start(): Event[] {
    if (this.started) return [];
    this.started = true;
    const shell = this.snapshot();
    return [this.ev({ type: 'response.created', response: shell }), this.ev({ type: 'response.in_progress', response: structuredClone(shell) })];
  }

  push(chunk: ChatCompletionChunk): Event[] {
    if (this.ended) return [];
    const out: Event[] = this.started ? [] : this.start();
    if (chunk.usage) this.usage = chunk.usage;
    const choice = chunk.choices[0];
    if (choice) {
      const d = (choice.delta ?? {}) as Delta;
      const reasoning = typeof d.reasoning_content === 'string' ? d.reasoning_content : typeof d.reasoning === 'string' ? d.reasoning : '';
      if (reasoning !== '') this.reasoningDelta(reasoning, out);
      if (typeof d.content === 'string' && d.content !== '') this.textDelta('output_text', d.content, out);
      if (typeof d.refusal === 'string' && d.refusal !== '') this.textDelta('refusal', d.refusal, out);
      for (const tc of d.tool_calls ?? []) this.toolDelta(tc, out);
      if (choice.finish_reason) this.finishReason = choice.finish_reason;
    }
    if (this.output.length > 0) this.committed = true;
    return out;
  }

  /** Closes the open item and ends with response.completed or response.incomplete. */
  finish(): Event[] {
    if (this.ended) return [];
    const out: Event[] = this.started ? [] : this.start();
    if (this.output.length === 0 && !this.current) this.textDelta('output_text', '', out); // an empty answer is one empty message
    const itemStatus = statusOf(this.finishReason).status === 'completed' ? 'completed' : 'incomplete';
    this.close(out, itemStatus);
    this.ended = true;
    const res = settle(this.snapshot(), this.finishReason, toResponsesUsage(this.usage));
    out.push(this.ev({ type: res.status === 'completed' ? 'response.completed' : 'response.incomplete', response: res }));
    return out;
  }

  /** Ends the stream on a failure (see the header for which event). */
  fail(err: StreamFailure): Event[] {
    if (this.ended) return [];
    this.ended = true;
    if (this.committed) {
      return [this.ev({ type: 'error', code: err.code ?? 'server_error', message: err.message, param: err.param ?? null })];
    }
    const out: Event[] = this.started ? [] : this.start();
    const res = this.snapshot();
    res.status = 'failed';
    res.error = { code: (err.code ?? 'server_error') as NonNullable<Response['error']>['code'], message: err.message };
    out.push(this.ev({ type: 'response.failed', response: res }));
    return out;
  }

  // ---------------------------------------------------------------------------

  private ev(e: Json): Event {
    const { type, ...rest } = e;
    return { type, sequence_number: this.seq++, ...rest } as unknown as Event;
  }

  private add(item: Json, out: Event[]): number {
    const index = this.output.length;
    this.output.push(structuredClone(item) as unknown as ResponseOutputItem);
    out.push(this.ev({ type: 'response.output_item.added', output_index: index, item }));
    return index;
  }

  private reasoningDelta(delta: string, out: Event[]): void {
    let cur = this.current;
    if (cur?.kind !== 'reasoning') {
      this.close(out);
      const id = newId('rs');
      const index = this.add({ id, type: 'reasoning', summary: [] }, out);
      out.push(this.ev({ type: 'response.reasoning_summary_part.added', item_id: id, output_index: index, summary_index: 0, part: { type: 'summary_text', text: '' } }));
      cur = this.current = { kind: 'reasoning', index, id, text: '' };
    }
    cur.text += delta;
    out.push(this.ev({ type: 'response.reasoning_summary_text.delta', item_id: cur.id, output_index: cur.index, summary_index: 0, delta }));
  }

  private textDelta(type: 'output_text' | 'refusal', delta: string, out: Event[]): void {
    let cur = this.current;
    if (cur?.kind !== 'message') {
      this.close(out);
      const id = newId('msg');
      const index = this.add({ id, type: 'message', status: 'in_progress', content: [], role: 'assistant' }, out);
      cur = this.current = { kind: 'message', index, id, parts: [], open: false };
    }
    let part = cur.parts[cur.parts.length - 1];
    if (!part || !cur.open || part.type !== type) {
      this.closePart(cur, out);
      part = { type, text: '' };
      cur.parts.push(part);
      cur.open = true;
      const empty = type === 'output_text' ? { type, annotations: [], logprobs: [], text: '' } : { type, refusal: '' };
      out.push(this.ev({ type: 'response.content_part.added', item_id: cur.id, output_index: cur.index, content_index: cur.parts.length - 1, part: empty }));
    }
    part.text += delta;
    if (delta === '') return;
    const base = { item_id: cur.id, output_index: cur.index, content_index: cur.parts.length - 1, delta };
    out.push(this.ev(type === 'output_text' ? { type: 'response.output_text.delta', ...base, logprobs: [] } : { type: 'response.refusal.delta', ...base }));
  }

  private toolDelta(tc: ToolDelta, out: Event[]): void {
    const known = this.calls.get(tc.index);
    const fragment = tc.custom?.input ?? tc.function?.arguments ?? '';
    if (known) {
      // A fragment for a call already closed (a backend interleaving calls) only reaches the final response.
      known.args += fragment;
      if (fragment !== '' && this.current === known) {
        const type = known.custom ? 'response.custom_tool_call_input.delta' : 'response.function_call_arguments.delta';
        out.push(this.ev({ type, item_id: known.id, output_index: known.index, delta: fragment }));
      } else if (fragment !== '') {
        this.patchCall(known);
      }
      return;
    }
    this.close(out);
    const custom = tc.type === 'custom' || tc.custom !== undefined;
    const flat = (custom ? tc.custom?.name : tc.function?.name) ?? '';
    const callId = tc.id ?? newId('fc').replace(/^fc_/, 'call_');
    const id = newId(custom ? 'ctc' : 'fc');
    const name = responsesName(this.ctx.names, flat);
    const item = custom
      ? { id, type: 'custom_tool_call', status: 'in_progress', call_id: callId, input: '', ...name }
      : { id, type: 'function_call', status: 'in_progress', arguments: '', call_id: callId, ...name };
    const index = this.add(item, out);
    const call: Extract<Open, { kind: 'call' }> = { kind: 'call', index, id, chatIndex: tc.index, custom, callId, name: flat, args: '' };
    this.calls.set(tc.index, call);
    this.current = call;
    if (fragment !== '') this.toolDelta({ index: tc.index, ...(custom ? { custom: { input: fragment } } : { function: { arguments: fragment } }) }, out);
  }

  private patchCall(call: Extract<Open, { kind: 'call' }>): void {
    const item = this.output[call.index] as unknown as Json;
    item[call.custom ? 'input' : 'arguments'] = call.args;
  }

  private closePart(cur: Extract<Open, { kind: 'message' }>, out: Event[]): void {
    if (!cur.open) return;
    cur.open = false;
    const i = cur.parts.length - 1;
    const part = cur.parts[i];
    if (!part) return;
    const base = { item_id: cur.id, output_index: cur.index, content_index: i };
    if (part.type === 'output_text') {
      out.push(this.ev({ type: 'response.output_text.done', ...base, text: part.text, logprobs: [] }));
      out.push(this.ev({ type: 'response.content_part.done', ...base, part: { type: 'output_text', annotations: [], logprobs: [], text: part.text } }));
    } else {
      out.push(this.ev({ type: 'response.refusal.done', ...base, refusal: part.text }));
      out.push(this.ev({ type: 'response.content_part.done', ...base, part: { type: 'refusal', refusal: part.text } }));
    }
  }

  /** Emits the done events of the open item and records its final form. */
  private close(out: Event[], status: 'completed' | 'incomplete' = 'completed'): void {
    const cur = this.current;
    if (!cur) return;
    this.current = undefined;
    let item: Json;
    if (cur.kind === 'reasoning') {
      const base = { item_id: cur.id, output_index: cur.index, summary_index: 0 };
      out.push(this.ev({ type: 'response.reasoning_summary_text.done', ...base, text: cur.text }));
      out.push(this.ev({ type: 'response.reasoning_summary_part.done', ...base, part: { type: 'summary_text', text: cur.text } }));
      item = { id: cur.id, type: 'reasoning', summary: [{ type: 'summary_text', text: cur.text }] };
    } else if (cur.kind === 'message') {
      this.closePart(cur, out);
      const content = cur.parts.map((p) => (p.type === 'output_text' ? { type: p.type, annotations: [], logprobs: [], text: p.text } : { type: p.type, refusal: p.text }));
      item = { id: cur.id, type: 'message', status, content, role: 'assistant' };
    } else {
      const name = responsesName(this.ctx.names, cur.name);
      if (cur.custom) {
        out.push(this.ev({ type: 'response.custom_tool_call_input.done', item_id: cur.id, output_index: cur.index, input: cur.args }));
        item = { id: cur.id, type: 'custom_tool_call', status, call_id: cur.callId, input: cur.args, ...name };
      } else {
        out.push(this.ev({ type: 'response.function_call_arguments.done', item_id: cur.id, output_index: cur.index, arguments: cur.args, name: name.name }));
        item = { id: cur.id, type: 'function_call', status, arguments: cur.args, call_id: cur.callId, ...name };
      }
    }
    this.output[cur.index] = structuredClone(item) as unknown as ResponseOutputItem;
    out.push(this.ev({ type: 'response.output_item.done', output_index: cur.index, item }));
  }
}
