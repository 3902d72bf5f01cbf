/**
 * The JSON text a stream chunk was parsed from, remembered beside it so the SSE writer can forward
 * that text instead of printing the object again (one JSON.stringify per chunk less on the hot
 * path). Only objects nobody changed since they were parsed keep a text: whoever changes a chunk
 * must update or drop its text (pipeline-streams.ts does, when it removes `usage`). Texts with a
 * line break are never kept, since they could not be one `data:` line.
 *
 * Kept in a ring of the last RING chunks, found by identity: the writer asks for a chunk's text
 * soon after it was parsed (usually in the same synchronous pull, a few layers up), and a chunk
 * asked for after RING newer ones were kept is printed again, which is correct, only slower. A
 * WeakMap did the same at ~15× the cost per chunk, plus ephemeron work in every GC.
 */
const RING = 512;
const ringValues: Array<object | undefined> = new Array<object | undefined>(RING).fill(undefined);
const ringTexts: Array<string | undefined> = new Array<string | undefined>(RING).fill(undefined);
let head = 0;

function slotOf(value: object): number {
  for (let i = 0, j = head; i < RING; i++, j = (j - 1) & (RING - 1)) if (ringValues[j] === value) return j;
  return -1;
}

/** Remembers `text` as the JSON of `value` (which was just parsed from it; primitives are not kept). */
export function keepText<T>(value: T, text: string): T {
  if (typeof value === 'object' && value !== null && text.indexOf('\n') < 0 && text.indexOf('\r') < 0) {
    head = (head + 1) & (RING - 1);
    ringValues[head] = value;
    ringTexts[head] = text;
  }
  return value;
}

/** The JSON text of `value`: the one it was parsed from when it is unchanged, else printed now. */
export function jsonText(value: unknown): string {
  if (value instanceof PlainChunk) return value.text;
  if (typeof value === 'object' && value !== null) {
    const i = slotOf(value);
    if (i >= 0) return ringTexts[i] as string;
  }
  return JSON.stringify(value);
}

function forget(i: number): void {
  ringValues[i] = undefined;
  ringTexts[i] = undefined;
}

const USAGE_KEY = '"usage"';
const USAGE_NULL = '"usage":null';

/**
 * After `delete chunk.usage` on a chunk whose `usage` was null: its text without that member, when
 * that can be done safely — the text holds `"usage"` exactly once (so it is the top-level key)
 * and written as `"usage":null`; else the text is dropped and the chunk will be printed.
 */
export function droppedUsageNull(value: object): void {
  const slot = slotOf(value);
  if (slot < 0) return;
  const cut = withoutUsageNull(ringTexts[slot] as string);
  if (cut === undefined) forget(slot);
  else ringTexts[slot] = cut;
}

/**
 * `text` without its one top-level `"usage":null` member; undefined when that is not provably safe.
 * `i` is where `"usage"` first stands in it, when the caller has looked already.
 */
function withoutUsageNull(t: string, i = t.indexOf(USAGE_KEY)): string | undefined {
  if (i < 0 || t.indexOf(USAGE_KEY, i + 1) >= 0 || !t.startsWith(USAGE_NULL, i)) return undefined;
  const end = i + USAGE_NULL.length;
  if (t[i - 1] === ',') return t.slice(0, i - 1) + t.slice(end);
  if (t[end] === ',') return t.slice(0, i) + t.slice(end + 1);
  return t.slice(0, i) + t.slice(end);
}

// The grammar of a plain chunk's text: compact JSON (no whitespace), keys without escapes.
const STR = String.raw`"(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"`;
const NUM = String.raw`-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?`;
const SCALAR = `(?:${STR}|${NUM}|null|true|false)`;
/** any key but those whose value decides something; their plain forms are listed apart */
const KEY = String.raw`"(?!(?:error|usage|finish_reason|choices|delta)")[A-Za-z_][A-Za-z0-9_]*"`;
const MEMBER = `(?:${KEY}:${SCALAR}|"usage":null|"finish_reason":null)`;
const FLAT = String.raw`\{(?:${MEMBER}(?:,${MEMBER})*)?\}`;
const CHOICE_MEMBER = `(?:${MEMBER}|"delta":${FLAT})`;
const CHOICE = String.raw`\{(?:${CHOICE_MEMBER}(?:,${CHOICE_MEMBER})*)?\}`;
const TOP_MEMBER = String.raw`(?:${MEMBER}|"choices":\[(?:${CHOICE}(?:,${CHOICE})*)?\])`;
const PLAIN = new RegExp(String.raw`^\{${TOP_MEMBER}(?:,${TOP_MEMBER})*\}$`);

/**
 * A stream chunk after the commit point that is kept as its text, not parsed: its text matched
 * PLAIN, a grammar whose every sentence is a valid JSON object (a strict subset of JSON: compact,
 * scalars and one level of `choices[].delta` objects) in which no member is named `error`, every
 * `finish_reason` and `usage` is null, and nothing is nested deeper. So it is provably not an
 * error, not the end of the answer and carries no usage — everything the gateway checks an event
 * for — and is forwarded as it came, at a fraction of JSON.parse's cost (an ordinary content
 * token of a chat or completions stream is one). Anything else is parsed as before.
 *
 * For any other reader it behaves as a read-only view of the chunk: `choices` and the other
 * top-level fields are parsed from the text on first use. Changing what they return does not
 * change the text; JSON.stringify gives the chunk.
 */
export class PlainChunk {
  private parsed: Record<string, unknown> | undefined;

  private constructor(public text: string) {}

  /** `text` as a PlainChunk when it is one (see the class), else undefined. */
  static of(text: string): PlainChunk | undefined {
    return PLAIN.test(text) ? new PlainChunk(text) : undefined;
  }

  private value(): Record<string, unknown> {
    this.parsed ??= JSON.parse(this.text) as Record<string, unknown>;
    return this.parsed;
  }

  /** Null or absent, by the grammar. */
  get usage(): null | undefined {
    return this.text.includes(USAGE_NULL) ? null : undefined;
  }

  get choices(): unknown {
    return this.value().choices;
  }

  get id(): unknown {
    return this.value().id;
  }

  get object(): unknown {
    return this.value().object;
  }

  get created(): unknown {
    return this.value().created;
  }

  get model(): unknown {
    return this.value().model;
  }

  /** Drops its `"usage":null` member (the client did not ask for usage). */
  dropUsageNull(): void {
    // keys have no escapes (the grammar), so a text without `"usage"` has no such member
    const at = this.text.indexOf(USAGE_KEY);
    if (at < 0) return;
    const cut = withoutUsageNull(this.text, at);
    if (cut !== undefined) this.text = cut;
    else {
      const { usage: _, ...rest } = this.value();
      this.text = JSON.stringify(rest);
    }
    this.parsed = undefined;
  }

  toJSON(): unknown {
    return this.value();
  }
}

/**
 * Chunks after which the SSE writer sends what it holds at once instead of at the end of the
 * event-loop turn: the router marks the chunk at a stream's commit point, so the client's first
 * token leaves in one write with the chunks buffered before it, while the rest of the stream is
 * joined into as few writes as possible.
 */
const flushPoints = new WeakSet<object>();

export function markFlushPoint(value: unknown): void {
  if (typeof value === 'object' && value !== null) flushPoints.add(value);
}

export function isFlushPoint(value: unknown): boolean {
  return typeof value === 'object' && value !== null && flushPoints.has(value);
}
