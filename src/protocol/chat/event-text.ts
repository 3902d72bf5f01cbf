/**
 * The JSON text a stream chunk was parsed from, remembered beside it so the SSE writer can forward
 * that text instead of printing the object again (one JSON.stringify per chunk less on the hot
 * path). Only objects nobody changed since they were parsed keep a text: whoever changes a chunk
 * must update or drop its text (gateway/pipeline-streams.ts does, when it removes or adds `usage`). Texts
 * with a line break are never kept, since they could not be one `data:` line.
 *
 * Kept in a ring of the last RING chunks, found by identity: the writer asks for a chunk's text
 * soon after it was parsed (usually in the same synchronous pull, a few layers up), and a chunk
 * asked for after RING newer ones were kept is printed again, which is correct, only slower. A
 * WeakMap did the same at ~15× the cost per chunk, plus ephemeron work in every GC.
 *
 * The ring is short and holds copies (`detached`) because what it holds outlives the stream: a
 * text read from an upstream is a slice of the whole read it came in, and a slice keeps its whole
 * read alive. With 512 entries, 64 streams at ~2,900 a second each left their usage chunk (parsed,
 * kept, never written) in the ring for ~180 ms: every read's string survived two young-generation
 * collections, was promoted, and ~1 MB a collection piled up in the old generation until the next
 * full GC (the gateway's RSS climbed ~140 → ~205 MB within a bench scenario; 64 entries and copies:
 * ~9 KB promoted a collection, flat).
 */
const RING = 64;
const ringValues: Array<object | undefined> = new Array<object | undefined>(RING).fill(undefined);
const ringTexts: Array<string | undefined> = new Array<string | undefined>(RING).fill(undefined);
let head = 0;

function slotOf(value: object): number {
  for (let i = 0, j = head; i < RING; i++, j = (j - 1) & (RING - 1)) if (ringValues[j] === value) return j;
  return -1;
}

/**
 * A copy of `text` that keeps nothing else alive. V8 makes a substring of 13 or more characters a
 * view into its parent string, so a short text sliced out of a large read would keep the whole
 * read alive for as long as the text is held. Joining forces a new flat string (the slice taken of
 * it then views only that copy). Use it for what is held beyond the read: the ring, a cache.
 */
export function detached(text: string): string {
  return (' ' + text).slice(1);
}

/** Remembers `text` as the JSON of `value` (which was just parsed from it; primitives are not kept). */
export function keepText<T>(value: T, text: string): T {
  if (typeof value === 'object' && value !== null && text.indexOf('\n') < 0 && text.indexOf('\r') < 0) {
    head = (head + 1) & (RING - 1);
    ringValues[head] = value;
    ringTexts[head] = detached(text);
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
/** A top-level `"usage":null` as the last or the first member of an object's text. */
const USAGE_LAST = ',"usage":null}';
const USAGE_FIRST = '{"usage":null,';

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
 * After `chunk.usage = null` on a chunk that had no `usage` member: its text with that member
 * appended (the last, as OpenAI writes it), else the text is dropped and the chunk will be printed.
 */
export function addedUsageNull(value: object): void {
  const slot = slotOf(value);
  if (slot < 0) return;
  const t = (ringTexts[slot] as string).trimEnd();
  if (!t.startsWith('{') || !t.endsWith('}')) forget(slot);
  else ringTexts[slot] = t.slice(1, -1).trim() === '' ? `{${USAGE_NULL}}` : `${t.slice(0, -1)},${USAGE_NULL}}`;
}

/**
 * `text` without its `"usage":null` member, when `"usage"` stands in it exactly once and the caller
 * knows that one to be the top-level member (from the parsed object, or from its place); else
 * undefined. `i` is where `"usage"` first stands in it, when the caller has looked already.
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
/**
 * The grammar, built twice: without and with a choice's own `finish_reason` allowed to be a string
 * (the finish chunk; anywhere else it is null). An ordinary token passes the first; only a text it
 * refuses is tried against the second, so finding the finish costs the tokens nothing.
 */
function grammar(finish: boolean): { whole: RegExp; choice: string; choiceMember: string; topMember: string } {
  const choiceMember = finish ? `(?:${MEMBER}|"finish_reason":${STR}|"delta":${FLAT})` : `(?:${MEMBER}|"delta":${FLAT})`;
  const choice = String.raw`\{(?:${choiceMember}(?:,${choiceMember})*)?\}`;
  const topMember = String.raw`(?:${MEMBER}|"choices":\[(?:${choice}(?:,${choice})*)?\])`;
  return { whole: new RegExp(String.raw`^\{${topMember}(?:,${topMember})*\}$`), choice, choiceMember, topMember };
}
const NO_FINISH = grammar(false);
const ANY = grammar(true);
const PLAIN = NO_FINISH.whole;
const PLAIN_FINISHING = ANY.whole;

/**
 * The same grammar cut at the opening of a choice's `delta` object: PLAIN_HEAD matches exactly the
 * texts from the start up to and including the first `"delta":{`, PLAIN_TAIL what may follow it.
 * A text whose head matches one and whose tail matches the other is in PLAIN (the two concatenate
 * along the grammar's own structure); a text in PLAIN with a delta splits that way at its first
 * `"delta":{` (no string of the grammar holds an unescaped quote, and no other key takes an
 * object). The chunks of one stream share their head (id, object, created, model, fingerprint,
 * the choice's index): it is checked once and then compared, and only the tail — the token — goes
 * through a regular expression. The head has no finish (a finish written before the delta is
 * checked whole); a tail with one is tried against PLAIN_TAIL_FINISHING.
 */
const tail = (g: typeof ANY): RegExp => new RegExp(String.raw`^(?:${MEMBER}(?:,${MEMBER})*)?\}(?:,${g.choiceMember})*\}(?:,${g.choice})*\](?:,${g.topMember})*\}$`);
const PLAIN_HEAD = new RegExp(String.raw`^\{(?:${NO_FINISH.topMember},)*"choices":\[(?:${NO_FINISH.choice},)*\{(?:${NO_FINISH.choiceMember},)*"delta":\{$`);
const PLAIN_TAIL = tail(NO_FINISH);
const PLAIN_TAIL_FINISHING = tail(ANY);
const DELTA_OPEN = '"delta":{';

/**
 * A delta (the text after its `"delta":{`, up to its closing brace) that carries nothing: every
 * member is `role`, or null, or the empty string. Applied to a text in PLAIN, whose delta members
 * are scalars, it reads the members one by one, so it decides exactly that.
 */
const NOTHING = `(?:"role":${SCALAR}|"[A-Za-z_][A-Za-z0-9_]*":(?:null|""))`;
const EMPTY_DELTA = new RegExp(String.raw`^(?:${NOTHING}(?:,${NOTHING})*)?\}`);

/** The last head of a stream's chunks that matched PLAIN_HEAD (one per stream: its reader keeps it). */
export class PlainHead {
  text = '';
  /** whether `"usage"` appears in it */
  hasUsage = true;
}

const FINISH_KEY = '"finish_reason"';
const FINISH_STRING = '"finish_reason":"';

/**
 * For a text in PLAIN_FINISHING but not in PLAIN: whether a choice's finish_reason is a non-empty
 * string (what completes an answer), or -1 when the string finish_reason is not the text's only
 * `"finish_reason"` (a repeated key, or several choices: the parsed chunk decides then). By the
 * grammar a string finish_reason stands only in a choice, and `"finish_reason":"` nowhere else
 * (strings hold no bare quote).
 */
function finishOf(text: string): boolean | -1 {
  const at = text.indexOf(FINISH_STRING);
  if (at < 0) return false;
  if (text.indexOf(FINISH_KEY) !== at || text.indexOf(FINISH_KEY, at + 1) >= 0) return -1;
  return text.charCodeAt(at + FINISH_STRING.length) !== 34; // not ""
}

/** Set by plainCheck: the text it accepted is in the grammar only with a string finish_reason. */
let checkedFinishing = false;

/** Whether `tail` (after a plain head) is plain, setting checkedFinishing. */
function tailCheck(tail: string): boolean {
  checkedFinishing = false;
  if (PLAIN_TAIL.test(tail)) return true;
  checkedFinishing = tail.includes(FINISH_STRING) && PLAIN_TAIL_FINISHING.test(tail);
  return checkedFinishing;
}

/**
 * -1 when `text` is not in the grammar (PLAIN_FINISHING); else the length of a head of it known to
 * hold no `"usage"`, or 0; checkedFinishing says whether it needed a string finish_reason.
 */
function plainCheck(text: string, known: PlainHead): number {
  // (a slice compared is several times faster than startsWith here, which compares char by char)
  if (known.text !== '' && text.slice(0, known.text.length) === known.text) {
    return tailCheck(text.slice(known.text.length)) ? (known.hasUsage ? 0 : known.text.length) : -1;
  }
  const at = text.indexOf(DELTA_OPEN);
  if (at > 0) {
    const head = text.slice(0, at + DELTA_OPEN.length);
    if (PLAIN_HEAD.test(head)) {
      known.text = head;
      known.hasUsage = head.includes(USAGE_KEY);
      return tailCheck(text.slice(head.length)) ? (known.hasUsage ? 0 : head.length) : -1;
    }
  }
  checkedFinishing = false;
  if (PLAIN.test(text)) return 0;
  // (the second expression only for a text that can be in it: the usage chunk is not)
  checkedFinishing = text.includes(FINISH_STRING) && PLAIN_FINISHING.test(text);
  return checkedFinishing ? 0 : -1;
}

/** For tests: the grammar as one expression (the reference the split check must agree with). */
export const PLAIN_GRAMMAR: RegExp = PLAIN_FINISHING;

/**
 * A stream chunk kept as its text, not parsed (once its consumer accepts such chunks: the router
 * does from the moment it opens a stream, lib/pollable.ts). Its text matched PLAIN, a grammar whose
 * every sentence is a valid JSON object (a strict subset of JSON: compact, scalars and one level
 * of `choices[].delta` objects) in which no member is named `error`, every `usage` is null, and
 * every `finish_reason` is null but a choice's own, which may be a string; nothing is nested
 * deeper. So it is provably not an error and carries no usage, whether it ends the answer is
 * `finishes`, and whether its delta carries anything (the commit point) is read from the text too
 * (`deltaCarries`): all the gateway checks an event for. It is forwarded as it came, at a
 * fraction of JSON.parse's cost: the role chunk, an ordinary content token and the finish chunk
 * of a chat stream are plain, and so are a completions stream's tokens. Anything else is parsed.
 *
 * For any other reader it behaves as a read-only view of the chunk: `choices` and the other
 * top-level fields are parsed from the text on first use. Changing what they return does not
 * change the text; JSON.stringify gives the chunk.
 */
export class PlainChunk {
  private parsed: Record<string, unknown> | undefined;
  /** the router's commit point (markFlushPoint) */
  flushPoint = false;

  /**
   * @param scanFrom where a top-level `"usage"` member could start at the earliest: the length of
   *   a head known to hold no `"usage"`, else 0
   */
  private constructor(
    public text: string,
    private scanFrom: number,
    /** a choice's finish_reason is a non-empty string: the chunk completes the answer */
    readonly finishes: boolean,
  ) {}

  /**
   * `text` as a PlainChunk when it is one (see the class), else undefined. `head`: the stream's
   * last known head (PLAIN_HEAD), checked once per stream instead of once per chunk.
   */
  static of(text: string, head: PlainHead = new PlainHead()): PlainChunk | undefined {
    const scanFrom = plainCheck(text, head);
    if (scanFrom < 0) return undefined;
    const finishes = checkedFinishing ? finishOf(text) : false;
    return finishes === -1 ? undefined : new PlainChunk(text, scanFrom, finishes);
  }

  /**
   * Whether the chunk's delta carries something for the client (a member other than `role` that
   * is neither null nor ""), read from the text when it has exactly one delta; undefined when it
   * has none or several (ask the parsed chunk). Besides the delta only a finish (`finishes`) can
   * carry anything in a plain chunk: its usage is null. With a key repeated in the delta the answer
   * may be true where the parsed object (whose last value wins) says false: erring towards sending.
   */
  deltaCarries(): boolean | undefined {
    const t = this.text;
    const at = t.indexOf(DELTA_OPEN);
    if (at < 0) return undefined;
    const from = at + DELTA_OPEN.length;
    if (t.indexOf(DELTA_OPEN, from) >= 0) return undefined;
    return !EMPTY_DELTA.test(t.slice(from));
  }

  private value(): Record<string, unknown> {
    this.parsed ??= JSON.parse(this.text) as Record<string, unknown>;
    return this.parsed;
  }

  /** Null or absent, by the grammar. */
  get usage(): null | undefined {
    return this.text.includes(USAGE_NULL, this.scanFrom) ? null : undefined;
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

  /**
   * Drops its top-level `"usage":null` member (the client did not ask for usage). The grammar also
   * lets a choice or a delta hold a `"usage":null` of its own, which stays: the text is cut only
   * where the member is provably the top-level one (the last member, as OpenAI writes it, or the
   * first) and the only `"usage"` in the text; anything else goes through the parsed object.
   */
  dropUsageNull(): void {
    const t = this.text;
    // keys have no escapes (the grammar), so a text without `"usage"` has no such member
    const at = t.indexOf(USAGE_KEY, this.scanFrom);
    if (at < 0) return;
    // its place proves the member top-level: the last one (as OpenAI writes it) or the first
    const placed = (at === t.length - USAGE_LAST.length + 1 && t.endsWith(USAGE_LAST)) || (at === 1 && t.startsWith(USAGE_FIRST));
    const cut = placed ? withoutUsageNull(t, at) : undefined;
    if (cut !== undefined) this.text = cut;
    else {
      const v = this.value();
      if (!('usage' in v)) return;
      const { usage: _, ...rest } = v;
      this.text = JSON.stringify(rest);
    }
    this.scanFrom = 0;
    this.parsed = undefined;
  }

  /**
   * Appends a top-level `"usage":null` member, as OpenAI writes it last (the client asked for usage
   * and this chunk, from an upstream that omits the member, has none). The text stays in the grammar.
   */
  addUsageNull(): void {
    this.text = `${this.text.slice(0, -1)},${USAGE_NULL}}`;
    if (this.parsed) this.parsed.usage = null;
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
  // a plain chunk (the usual first token) carries the mark itself: a WeakSet costs more
  if (value instanceof PlainChunk) value.flushPoint = true;
  else if (typeof value === 'object' && value !== null) flushPoints.add(value);
}

export function isFlushPoint(value: unknown): boolean {
  if (value instanceof PlainChunk) return value.flushPoint;
  return typeof value === 'object' && value !== null && flushPoints.has(value);
}
