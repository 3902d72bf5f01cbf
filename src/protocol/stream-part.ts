/**
 * The elements of a stream, from a backend through the router, the pipeline and the coalescing
 * log to the SSE writer: a tagged union of parts (`kind`), each carrying what the layers need to
 * know about it as its own fields.
 *
 * - `ChunkPart<C>`: one OpenAI-style chunk (chat or legacy completions). It holds the chunk, the
 *   JSON text it came in (while nobody changed it) and the writer's flush mark. The writer forwards
 *   that text instead of printing the object again; a plain text (chat/event-text.ts) is not even
 *   parsed unless somebody reads the chunk.
 * - `EventPart`: one server-sent event forwarded as it came (event name + data text), for a native
 *   stream of another protocol (a Responses or Messages upstream served to a client of the same
 *   API), whose usage is read on the way by whoever produces it.
 *
 * Hot path: one part object per chunk and nothing else per chunk (no closure, no side table).
 * The compiler keeps the forwarded text true: the chunk is read through `chunk` (deeply
 * read-only), the only ways to change it are the part's own methods, and `edit()` — the one
 * general change — drops the text; the writer can get a text only from `json()`.
 */
import { plainDeltaCarries, plainHasUsageNull, plainScan, plainWithoutUsageNull, PlainHead, withoutUsageNull, withUsageNull } from './chat/event-text.ts';

export { PlainHead };

/** `T` read-only all the way down: what a part hands out for reading. */
export type DeepReadonly<T> = T extends (...args: never[]) => unknown
  ? T
  : T extends ReadonlyArray<infer E>
    ? ReadonlyArray<DeepReadonly<E>>
    : T extends object
      ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
      : T;

/** What every part has: the router's commit point mark, read by the SSE writer. */
export interface PartBase {
  /**
   * The writer sends what it holds at once after this part instead of at the end of the
   * event-loop turn: the router marks the part at a stream's commit point, so the client's first
   * token leaves in one write with the parts buffered before it.
   */
  flush: boolean;
}

/** A stream chunk's top-level `usage`, as its type declares it. */
type UsageOf<C> = C extends { usage?: infer U } ? U : undefined;

/**
 * One chunk of an OpenAI-style stream (chat.completion.chunk, text_completion). Made by
 * `ChunkPart.plain` (a text in the plain grammar, parsed only when read), `ChunkPart.parsed` (a
 * chunk and the text it was parsed from) or `ChunkPart.of` (a chunk built here, no text).
 */
export class ChunkPart<C extends object> implements PartBase {
  readonly kind = 'chunk' as const;
  flush = false;

  /**
   * @param text the JSON text of the chunk as it is now, or undefined (printed when written)
   * @param value the chunk, or undefined for a plain part not read yet
   * @param scanFrom a plain part: where a top-level `"usage"` could start at the earliest; -1 when
   *   the part is not plain
   * @param finishes a plain part: a choice's finish_reason is a non-empty string
   */
  private constructor(
    private text: string | undefined,
    private value: C | undefined,
    private scanFrom: number,
    private finishes_: boolean,
  ) {}

  /** A chunk built by the gateway (a translated stream, a cache entry): printed when written. */
  static of<C extends object>(value: C): ChunkPart<C> {
    return new ChunkPart<C>(undefined, value, -1, false);
  }

  /**
   * A chunk just parsed from `text`, forwarded as that text while unchanged. A text with a line
   * break is not kept: it could not be one `data:` line.
   */
  static parsed<C extends object>(value: C, text: string): ChunkPart<C> {
    const keep = text.indexOf('\n') < 0 && text.indexOf('\r') < 0;
    return new ChunkPart<C>(keep ? text : undefined, value, -1, false);
  }

  /**
   * `text` as a plain part when it is in the plain grammar (see plainScan), else undefined (parse
   * it). `head`: the stream's last known head, checked once per stream instead of once per chunk.
   * The caller vouches that `C` is the chunk type the text is a sentence of.
   */
  static plain<C extends object>(text: string, head: PlainHead): ChunkPart<C> | undefined {
    const scan = plainScan(text, head);
    if (scan < 0) return undefined;
    return new ChunkPart<C>(text, undefined, (scan - (scan % 2)) / 2, scan % 2 === 1);
  }

  /** A chunk's text written by the gateway itself (the coalescing log): plain, else parsed. */
  static fromText<C extends object>(text: string, head: PlainHead): ChunkPart<C> {
    return ChunkPart.plain<C>(text, head) ?? ChunkPart.parsed(JSON.parse(text) as C, text);
  }

  /**
   * Whether the part is plain: its text is in the plain grammar (no error, usage null or absent),
   * so `finishes` and `deltaCarries()` answer from the text without parsing it.
   */
  get plain(): boolean {
    return this.scanFrom >= 0;
  }

  /** A plain part: whether it completes the answer (a choice's non-empty string finish_reason). */
  get finishes(): boolean {
    return this.finishes_;
  }

  /** The chunk, for reading (a plain part is parsed on first read). Change it with `edit()`. */
  get chunk(): DeepReadonly<C> {
    return this.current() as DeepReadonly<C>;
  }

  /** The JSON text to write: the one it came in while unchanged, else the chunk printed now. */
  json(): string {
    return this.text ?? JSON.stringify(this.value);
  }

  /**
   * The chunk, to change: the one general way to change a part, so it drops the saved text (the
   * part is printed when written) and the part is no longer plain.
   */
  edit(): C {
    const v = this.current();
    this.text = undefined;
    this.scanFrom = -1;
    this.finishes_ = false;
    return v;
  }

  /** The chunk's top-level `usage` (a plain part's, null or absent, read from its text). */
  usage(): UsageOf<C> | null | undefined {
    if (this.scanFrom >= 0) return plainHasUsageNull(this.text as string, this.scanFrom) ? null : undefined;
    return (this.value as { usage?: UsageOf<C> | null }).usage;
  }

  /**
   * A plain part with exactly one delta: whether it carries something for the client (see
   * plainDeltaCarries); undefined otherwise (ask the chunk).
   */
  deltaCarries(): boolean | undefined {
    return this.scanFrom >= 0 ? plainDeltaCarries(this.text as string) : undefined;
  }

  /**
   * Removes the chunk's top-level `usage` member (the client did not ask for usage), cutting
   * `"usage":null` out of the saved text where that is provably the member; anything less certain
   * drops the text.
   */
  dropUsage(): void {
    const t = this.text;
    if (this.scanFrom >= 0) {
      const cut = plainWithoutUsageNull(t as string, this.scanFrom);
      if (cut === t) return;
      if (cut !== undefined) {
        this.text = cut;
        this.scanFrom = 0;
        this.value = undefined;
        return;
      }
    }
    const v = this.current() as { usage?: unknown };
    if (!('usage' in v)) return;
    if (this.scanFrom >= 0) {
      // a plain text printed without the member stays plain (compact JSON of the same shape)
      const { usage: _, ...rest } = v;
      this.text = JSON.stringify(rest);
      this.scanFrom = 0;
      this.value = undefined;
      return;
    }
    delete v.usage;
    this.text = t === undefined ? undefined : withoutUsageNull(t);
  }

  /**
   * Gives a chunk without a top-level `usage` member `"usage": null` (the client asked for usage
   * and this chunk, from an upstream that omits the member, has none), as OpenAI writes it: last.
   */
  addUsageNull(): void {
    const t = this.text;
    if (this.scanFrom >= 0) {
      if (plainHasUsageNull(t as string, this.scanFrom)) return;
      // the text stays in the grammar
      this.text = `${(t as string).slice(0, -1)},"usage":null}`;
      this.value = undefined;
      return;
    }
    const v = this.value as { usage?: unknown };
    if ('usage' in v) return;
    v.usage = null;
    this.text = t === undefined ? undefined : withUsageNull(t);
  }

  private current(): C {
    this.value ??= JSON.parse(this.text as string) as C;
    return this.value;
  }
}

/** Token usage as the gateway accounts it (the Chat Completions names), whatever the protocol. */
export interface PartUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number; cache_creation_tokens?: number } | undefined;
}

/**
 * One server-sent event forwarded as it came: its `event:` name (empty for none) and its `data:`
 * text (a line break in it becomes another `data:` line). Whoever makes the part reads what the
 * gateway needs from the event on the way (the writer never parses it): the answer's usage so far,
 * whether it is the commit point (the first content) and whether it ends the answer.
 */
export class EventPart implements PartBase {
  readonly kind = 'event' as const;
  flush = false;
  /** the answer's usage as known after this event (cumulative), when this event told it */
  usage: PartUsage | undefined = undefined;

  constructor(
    readonly event: string,
    readonly data: string,
    /** the event carries content for the client: a stream's first such event is its commit point */
    readonly content = false,
    /** the event ends the answer (a completed, incomplete or stopped message) */
    readonly final = false,
    /** `data` is JSON the gateway printed: one line (the writer need not look for line breaks) */
    readonly printed = false,
  ) {}
}

/** An element of a stream: a chunk of an OpenAI-style stream, or a forwarded event. */
export type StreamPart<C extends object = object> = ChunkPart<C> | EventPart;

/**
 * The chunk of a part, for a consumer that translates the stream into another protocol (and so
 * never writes the part itself): the chunk is the consumer's to keep or change, and the part no
 * longer forwards its text.
 */
export function chunkOf<C extends object>(part: ChunkPart<C>): C {
  return part.edit();
}

/** The SSE text of a part: `data: …` for a chunk, `event: …` + `data: …` for a forwarded event. */
export function sseText(part: StreamPart): string {
  if (part.kind === 'chunk') return `data: ${part.json()}\n\n`;
  const data = !part.printed && part.data.includes('\n') ? part.data.split(/\r?\n/).join('\ndata: ') : part.data;
  return part.event === '' ? `data: ${data}\n\n` : `event: ${part.event}\ndata: ${data}\n\n`;
}
