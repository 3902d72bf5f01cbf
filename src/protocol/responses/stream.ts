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
 * The events come out as wire parts (EventPart: name, JSON text, commit-point and final flags),
 * printed once when made: the gateway writes them as they are, and the objects they were printed
 * from are the stream's own to keep (no copies). An ordinary token's delta is written from the
 * chunk's escaped text (text()), without an object at all.
 *
 * Commit point: `committed` turns true with the first output item (push() returns its events).
 * The caller may hold start()'s events back until then, so a failure before it can still fail over.
 * fail(): before the commit point `response.failed` (status "failed", `error` set); after it an
 * `error` event, OpenAI's report of a stream that broke mid-answer. Either ends the stream.
 */
import type { ChatCompletionChunk } from '../chat/schema.ts';
import { inProgress, newId, responseShell, settle, shellRuns, statusOf, toResponsesUsage, type LiveMembers, type ResponseContext, type ShellRuns } from './from-chat.ts';
import { responsesName } from './names.ts';
import type { Response, ResponseOutputItem, ResponseStreamEvent } from './types.ts';
import { EventPart, type PartUsage } from '../stream-part.ts';
import type { StreamTranslator } from '../client-protocol.ts';
import { isContentEventType, TERMINAL_EVENTS } from './usage.ts';


export interface StreamFailure {
  message: string;
  /** e.g. `server_error`, `rate_limit_exceeded`. */
  code?: string | null;
  param?: string | null;
}

type Event = EventPart;
/** The event types this stream writes (plain ASCII: printed without escaping). */
type EventType = ResponseStreamEvent['type'];
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

/** A message's content part; its text kept JSON-escaped, as the plain tokens bring it (see text()). */
interface TextPart {
  type: 'output_text' | 'refusal';
  escaped: string;
  /** an output_text part: its delta events' text between the sequence number and the delta */
  deltaMid: string;
}

const DELTA_HEAD = '{"type":"response.output_text.delta","sequence_number":';
const DELTA_TAIL = '","logprobs":[]}';
/** A string as the body of a JSON string literal (without its quotes). */
const jsonEscape = (s: string): string => JSON.stringify(s).slice(1, -1);
/** The text a JSON string literal's body stands for: the inverse of jsonEscape for any valid body. */
const jsonUnescape = (escaped: string): string => JSON.parse(`"${escaped}"`) as string;

/** A content part's JSON, from its escaped text. */
function partJson(p: TextPart): string {
  return p.type === 'output_text' ? `{"type":"output_text","annotations":[],"logprobs":[],"text":"${p.escaped}"}` : `{"type":"refusal","refusal":"${p.escaped}"}`;
}

/**
 * A stream's response printed again and again (created, in_progress, the terminal event): the
 * runs of members fixed by the request printed once, the live members and the output each time.
 */
class ResponsePrinter {
  private readonly head: string;
  private readonly background: string;
  private readonly request: string;
  private readonly settings: string;
  private readonly tail: string;

  constructor(r: ShellRuns) {
    const inner = (o: object): string => JSON.stringify(o).slice(1, -1);
    // (the head's id is the gateway's own, and background a boolean: no escaping needed)
    this.head = `"id":"${r.head.id}","object":"response","created_at":${r.head.created_at}`;
    this.background = `"background":${r.background.background === true}`;
    this.request = inner(r.request);
    this.settings = inner(r.settings);
    this.tail = inner(r.tail);
  }

  /** The response's JSON with these live members and the output (printed items). */
  print(live: LiveMembers, output: string): string {
    return (
      `{${this.head},"status":"${live.status ?? 'in_progress'}",${this.background},"completed_at":${live.completed_at ?? null},"error":${json(live.error)},` +
      `"incomplete_details":${json(live.incomplete_details)},${this.request},"output":${output},${this.settings},"usage":${json(live.usage)},${this.tail}}`
    );
  }
}

/** A live member's JSON (most are null while a response streams). */
function json(v: unknown): string {
  return v === null || v === undefined ? 'null' : JSON.stringify(v);
}

type Open =
  | { kind: 'reasoning'; index: number; id: string; text: string }
  | { kind: 'message'; index: number; id: string; parts: TextPart[]; open: boolean }
  | { kind: 'call'; index: number; id: string; chatIndex: number; custom: boolean; callId: string; name: string; args: string };

export class StreamFromChat implements StreamTranslator {
  private seq = 0;
  private readonly output: ResponseOutputItem[] = [];
  private readonly printer: ResponsePrinter;
  /** each closed item's JSON as its output_item.done printed it (undefined: print the item) */
  private readonly printedItems: Array<string | undefined> = [];
  private current: Open | undefined;
  /** chat tool-call index → its item, for deltas of calls already closed */
  private readonly calls = new Map<number, Extract<Open, { kind: 'call' }>>();
  private finishReason: string | null = null;
  private usage: ChatCompletionChunk['usage'] = null;
  private started = false;
  private ended = false;
  /** true once an output item was emitted: the client has content. */
  committed = false;

  constructor(private readonly ctx: ResponseContext) {
    this.printer = new ResponsePrinter(shellRuns(ctx));
  }

  /** The response as it stands (status in_progress until finish()): a copy. */
  snapshot(): Response {
    return structuredClone(this.response());
  }

  /** response.created and response.in_progress (once): the same response, printed once. */
  start(): Event[] {
    if (this.started) return [];
    this.started = true;
    const response = `,"response":${this.printer.print(inProgress(), '[]')}}`;
    return [this.printed('response.created', response, false, false), this.printed('response.in_progress', response, false, false)];
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

  /**
   * A token's content, still JSON-escaped (a plain chunk's, protocol/chat/content-text.ts): its
   * events appended to `out`, as push() gives them for the chunk. While an output_text part is
   * open that is one output_text.delta written from the fragment, without printing an object.
   */
  text(escaped: string, out: Event[]): void {
    if (this.ended) return;
    const cur = this.current;
    const part = cur?.kind === 'message' && cur.open ? cur.parts[cur.parts.length - 1] : undefined;
    if (part?.type !== 'output_text' || escaped === '') {
      if (!this.started) out.push(...this.start());
      this.textDelta('output_text', jsonUnescape(escaped), out);
      if (this.output.length > 0) this.committed = true;
      return;
    }
    part.escaped += escaped;
    out.push(new EventPart('response.output_text.delta', DELTA_HEAD + this.seq++ + part.deltaMid + escaped + DELTA_TAIL, true, false, true));
  }

  /**
   * Closes the open item and ends with response.completed or response.incomplete. `usage`: the
   * stream's usage as the gateway reads it, set on that last part.
   */
  finish(usage?: PartUsage): Event[] {
    if (this.ended) return [];
    const out: Event[] = this.started ? [] : this.start();
    if (this.output.length === 0 && !this.current) this.textDelta('output_text', '', out); // an empty answer is one empty message
    const itemStatus = statusOf(this.finishReason).status === 'completed' ? 'completed' : 'incomplete';
    this.close(out, itemStatus);
    this.ended = true;
    const live = settle(inProgress(), this.finishReason, toResponsesUsage(this.usage));
    const items = this.output.map((item, i) => this.printedItems[i] ?? JSON.stringify(item));
    const type = live.status === 'completed' ? 'response.completed' : 'response.incomplete';
    const json = this.printer.print(live, `[${items.join(',')}]`);
    const last = this.printed(type, `,"response":${json}}`, false, true);
    last.usage = usage;
    out.push(last);
    return out;
  }

  /** Ends the stream on a failure (see the header for which event). */
  fail(err: StreamFailure): Event[] {
    if (this.ended) return [];
    this.ended = true;
    if (this.committed) {
      return [this.ev('error', { code: err.code ?? 'server_error', message: err.message, param: err.param ?? null })];
    }
    const out: Event[] = this.started ? [] : this.start();
    const res = this.response();
    res.status = 'failed';
    res.error = { code: (err.code ?? 'server_error') as NonNullable<Response['error']>['code'], message: err.message };
    out.push(this.ev('response.failed', { response: res }));
    return out;
  }

  // ---------------------------------------------------------------------------

  /** The response now: the stream's own output array (print or copy it before it changes). */
  private response(): Response {
    const r = responseShell(this.ctx);
    r.output = this.output;
    return r;
  }

  /** An event as a part: `type` and `sequence_number` first, then `fields` (not empty); printed now. */
  private ev(type: EventType, fields: Json): Event {
    const item = fields.item as { type?: unknown } | undefined;
    const content = isContentEventType(type, typeof item?.type === 'string' ? item.type : undefined);
    return this.printed(type, `,${JSON.stringify(fields).slice(1)}`, content, TERMINAL_EVENTS.has(type));
  }

  /** A part from its members after `sequence_number` (`rest`: `,"k":v…}`), already printed. */
  private printed(type: EventType, rest: string, content = false, final = false): Event {
    return new EventPart(type, `{"type":"${type}","sequence_number":${this.seq++}${rest}`, content, final, true);
  }

  /** Adds an item (the stream's from now on: printed in the event before it may change). */
  private add(item: Json, out: Event[]): number {
    const index = this.output.length;
    out.push(this.ev('response.output_item.added', { output_index: index, item }));
    this.output.push(item as unknown as ResponseOutputItem);
    return index;
  }

  private reasoningDelta(delta: string, out: Event[]): void {
    let cur = this.current;
    if (cur?.kind !== 'reasoning') {
      this.close(out);
      const id = newId('rs');
      const index = this.add({ id, type: 'reasoning', summary: [] }, out);
      out.push(this.ev('response.reasoning_summary_part.added', { item_id: id, output_index: index, summary_index: 0, part: { type: 'summary_text', text: '' } }));
      cur = this.current = { kind: 'reasoning', index, id, text: '' };
    }
    cur.text += delta;
    out.push(this.ev('response.reasoning_summary_text.delta', { item_id: cur.id, output_index: cur.index, summary_index: 0, delta }));
  }

  private textDelta(type: 'output_text' | 'refusal', delta: string, out: Event[]): void {
    let cur = this.current;
    if (cur?.kind !== 'message') {
      this.close(out);
      const id = newId('msg');
      const index = this.output.length;
      const item = { id, type: 'message', status: 'in_progress', content: [], role: 'assistant' } as const;
      out.push(this.printed('response.output_item.added', `,"output_index":${index},"item":{"id":"${id}","type":"message","status":"in_progress","content":[],"role":"assistant"}}`, true));
      this.output.push(item as unknown as ResponseOutputItem);
      cur = this.current = { kind: 'message', index, id, parts: [], open: false };
    }
    let part = cur.parts[cur.parts.length - 1];
    if (!part || !cur.open || part.type !== type) {
      this.closePart(cur, out);
      const base = `,"item_id":"${cur.id}","output_index":${cur.index},"content_index":${cur.parts.length}`;
      part = { type, escaped: '', deltaMid: `${base},"delta":"` };
      cur.parts.push(part);
      cur.open = true;
      out.push(this.printed('response.content_part.added', `${base},"part":${partJson(part)}}`));
    }
    if (delta === '') return;
    part.escaped += jsonEscape(delta);
    const base = { item_id: cur.id, output_index: cur.index, content_index: cur.parts.length - 1, delta };
    out.push(type === 'output_text' ? this.ev('response.output_text.delta', { ...base, logprobs: [] }) : this.ev('response.refusal.delta', base));
  }

  private toolDelta(tc: ToolDelta, out: Event[]): void {
    const known = this.calls.get(tc.index);
    const fragment = tc.custom?.input ?? tc.function?.arguments ?? '';
    if (known) {
      // A fragment for a call already closed (a backend interleaving calls) only reaches the final response.
      known.args += fragment;
      if (fragment !== '' && this.current === known) {
        const type = known.custom ? 'response.custom_tool_call_input.delta' : 'response.function_call_arguments.delta';
        out.push(this.ev(type, { item_id: known.id, output_index: known.index, delta: fragment }));
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
    this.printedItems[call.index] = undefined;
  }

  private closePart(cur: Extract<Open, { kind: 'message' }>, out: Event[]): void {
    if (!cur.open) return;
    cur.open = false;
    const i = cur.parts.length - 1;
    const part = cur.parts[i];
    if (!part) return;
    // printed from the escaped text: the text is never printed again
    const base = `,"item_id":"${cur.id}","output_index":${cur.index},"content_index":${i}`;
    if (part.type === 'output_text') {
      out.push(this.printed('response.output_text.done', `${base},"text":"${part.escaped}","logprobs":[]}`));
    } else {
      out.push(this.printed('response.refusal.done', `${base},"refusal":"${part.escaped}"}`));
    }
    out.push(this.printed('response.content_part.done', `${base},"part":${partJson(part)}}`));
  }

  /** Emits the done events of the open item and records its final form. */
  private close(out: Event[], status: 'completed' | 'incomplete' = 'completed'): void {
    const cur = this.current;
    if (!cur) return;
    this.current = undefined;
    let item: Json;
    let printed: string | undefined;
    if (cur.kind === 'reasoning') {
      const base = { item_id: cur.id, output_index: cur.index, summary_index: 0 };
      out.push(this.ev('response.reasoning_summary_text.done', { ...base, text: cur.text }));
      out.push(this.ev('response.reasoning_summary_part.done', { ...base, part: { type: 'summary_text', text: cur.text } }));
      item = { id: cur.id, type: 'reasoning', summary: [{ type: 'summary_text', text: cur.text }] };
    } else if (cur.kind === 'message') {
      this.closePart(cur, out);
      const content = cur.parts.map((p) => (p.type === 'output_text' ? { type: p.type, annotations: [], logprobs: [], text: jsonUnescape(p.escaped) } : { type: p.type, refusal: jsonUnescape(p.escaped) }));
      item = { id: cur.id, type: 'message', status, content, role: 'assistant' };
      printed = `{"id":"${cur.id}","type":"message","status":"${status}","content":[${cur.parts.map(partJson).join(',')}],"role":"assistant"}`;
    } else {
      const name = responsesName(this.ctx.names, cur.name);
      if (cur.custom) {
        out.push(this.ev('response.custom_tool_call_input.done', { item_id: cur.id, output_index: cur.index, input: cur.args }));
        item = { id: cur.id, type: 'custom_tool_call', status, call_id: cur.callId, input: cur.args, ...name };
      } else {
        out.push(this.ev('response.function_call_arguments.done', { item_id: cur.id, output_index: cur.index, arguments: cur.args, name: name.name }));
        item = { id: cur.id, type: 'function_call', status, arguments: cur.args, call_id: cur.callId, ...name };
      }
    }
    printed ??= JSON.stringify(item);
    out.push(this.printed('response.output_item.done', `,"output_index":${cur.index},"item":${printed}}`));
    this.output[cur.index] = item as unknown as ResponseOutputItem;
    this.printedItems[cur.index] = printed;
  }
}
