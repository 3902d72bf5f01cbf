/**
 * What a stream chunk's JSON text says, read from the text without parsing it: whether it is in the
 * plain grammar (then it provably carries no error and no usage, and whether it finishes the
 * answer or carries a token is read from the text too), and the text edits that add or drop a
 * top-level `"usage":null` member. The part that holds a text and its chunk is
 * protocol/stream-part.ts; these are the pure string functions it calls.
 */

/**
 * A copy of `text` that keeps nothing else alive. V8 makes a substring of 13 or more characters a
 * view into its parent string, so a short text sliced out of a large upstream read would keep the
 * whole read alive for as long as the text is held. Joining forces a new flat string. Use it for
 * what is held beyond the stream: the coalescing log, a cache entry.
 */
export function detached(text: string): string {
  return (' ' + text).slice(1);
}

const USAGE_KEY = '"usage"';
const USAGE_NULL = '"usage":null';
/** A top-level `"usage":null` as the last or the first member of an object's text. */
const USAGE_LAST = ',"usage":null}';
const USAGE_FIRST = '{"usage":null,';

/**
 * `text` without its `"usage":null` member, when `"usage"` stands in it exactly once and the caller
 * knows that one to be the top-level member (from the parsed object, or from its place); else
 * undefined (the caller prints the chunk). `i` is where `"usage"` first stands in it, when the
 * caller has looked already.
 */
export function withoutUsageNull(t: string, i = t.indexOf(USAGE_KEY)): string | undefined {
  if (i < 0 || t.indexOf(USAGE_KEY, i + 1) >= 0 || !t.startsWith(USAGE_NULL, i)) return undefined;
  const end = i + USAGE_NULL.length;
  if (t[i - 1] === ',') return t.slice(0, i - 1) + t.slice(end);
  if (t[end] === ',') return t.slice(0, i) + t.slice(end + 1);
  return t.slice(0, i) + t.slice(end);
}

/**
 * A plain text (in the grammar) without its top-level `"usage":null`: `text` itself when it has no
 * `"usage"` from `scanFrom` on, the cut text when the member's place proves it top-level (the last
 * member, as OpenAI writes it, or the first) and it is the only `"usage"`; undefined when only the
 * parsed object can tell (a choice or a delta may hold a `"usage":null` of its own).
 */
export function plainWithoutUsageNull(t: string, scanFrom: number): string | undefined {
  // keys have no escapes (the grammar), so a text without `"usage"` has no such member
  const at = t.indexOf(USAGE_KEY, scanFrom);
  if (at < 0) return t;
  const placed = (at === t.length - USAGE_LAST.length + 1 && t.endsWith(USAGE_LAST)) || (at === 1 && t.startsWith(USAGE_FIRST));
  return placed ? withoutUsageNull(t, at) : undefined;
}

/** Whether a plain text holds `"usage":null` from `scanFrom` on (its only possible usage). */
export function plainHasUsageNull(t: string, scanFrom: number): boolean {
  return t.includes(USAGE_NULL, scanFrom);
}

/**
 * The text of an object without a top-level `usage` member with `"usage":null` appended (the last
 * member, as OpenAI writes it); undefined when the text is not plainly one object (the caller
 * prints the chunk).
 */
export function withUsageNull(text: string): string | undefined {
  const t = text.trimEnd();
  if (!t.startsWith('{') || !t.endsWith('}')) return undefined;
  return t.slice(1, -1).trim() === '' ? `{${USAGE_NULL}}` : `${t.slice(0, -1)},${USAGE_NULL}}`;
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

/** plainCheck's verdicts on a tail or a whole text: not in the grammar, in it, in it with a string finish_reason. */
const REFUSED = -1;
const ACCEPTED = 0;
const FINISHING = 1;

/** Whether `tail` (after a plain head) is plain, and whether it needed a string finish_reason. */
function tailCheck(tail: string): number {
  if (PLAIN_TAIL.test(tail)) return ACCEPTED;
  return tail.includes(FINISH_STRING) && PLAIN_TAIL_FINISHING.test(tail) ? FINISHING : REFUSED;
}

/**
 * -1 when `text` is not in the grammar (PLAIN_FINISHING); else `2 * from + finishing`, where `from`
 * is the length of a head of it known to hold no `"usage"` (or 0) and `finishing` (0 or 1) whether
 * it is in the grammar only with a string finish_reason. Both results in one number: this runs
 * once per upstream chunk, and a pair would be an allocation.
 */
function plainCheck(text: string, known: PlainHead): number {
  // (a slice compared is several times faster than startsWith here, which compares char by char)
  if (known.text !== '' && text.slice(0, known.text.length) === known.text) {
    const v = tailCheck(text.slice(known.text.length));
    return v === REFUSED ? REFUSED : 2 * (known.hasUsage ? 0 : known.text.length) + v;
  }
  const at = text.indexOf(DELTA_OPEN);
  if (at > 0) {
    const head = text.slice(0, at + DELTA_OPEN.length);
    if (PLAIN_HEAD.test(head)) {
      known.text = head;
      known.hasUsage = head.includes(USAGE_KEY);
      const v = tailCheck(text.slice(head.length));
      return v === REFUSED ? REFUSED : 2 * (known.hasUsage ? 0 : head.length) + v;
    }
  }
  if (PLAIN.test(text)) return ACCEPTED;
  // (the second expression only for a text that can be in it: the usage chunk is not)
  return text.includes(FINISH_STRING) && PLAIN_FINISHING.test(text) ? FINISHING : REFUSED;
}

/**
 * Whether `text` is a plain chunk: -1 when not, else `2 * scanFrom + finishes`: `scanFrom` where
 * a top-level `"usage"` member could start at the earliest (the length of a head known to hold
 * none, else 0), `finishes` (0 or 1) whether a choice's finish_reason is a non-empty string (the
 * chunk completes the answer). `head`: the stream's last known head (PLAIN_HEAD), checked once per
 * stream instead of once per chunk.
 *
 * A plain text matched PLAIN, a grammar whose every sentence is a valid JSON object (a strict
 * subset of JSON: compact, scalars and one level of `choices[].delta` objects) in which no member
 * is named `error`, every `usage` is null, and every `finish_reason` is null but a choice's own,
 * which may be a string; nothing is nested deeper. So it is provably not an error and carries no
 * usage, whether it ends the answer is read from the text, and so is whether its delta carries
 * anything (plainDeltaCarries): all the gateway checks an event for. The role chunk, an ordinary
 * content token and the finish chunk of a chat stream are plain, and so are a completions
 * stream's tokens. Anything else is parsed.
 */
export function plainScan(text: string, head: PlainHead): number {
  const v = plainCheck(text, head);
  if (v < 0) return -1;
  if (v % 2 === 0) return v;
  const finishes = finishOf(text);
  return finishes === -1 ? -1 : finishes ? v : v - 1;
}

/**
 * Whether a plain text's delta carries something for the client (a member other than `role` that
 * is neither null nor ""), when it has exactly one delta; undefined when it has none or several
 * (ask the parsed chunk). Besides the delta only a finish can carry anything in a plain chunk: its
 * usage is null. With a key repeated in the delta the answer may be true where the parsed object
 * (whose last value wins) says false: erring towards sending.
 */
export function plainDeltaCarries(t: string): boolean | undefined {
  const at = t.indexOf(DELTA_OPEN);
  if (at < 0) return undefined;
  const from = at + DELTA_OPEN.length;
  if (t.indexOf(DELTA_OPEN, from) >= 0) return undefined;
  return !EMPTY_DELTA.test(t.slice(from));
}

/** For tests: the grammar as one expression (the reference the split check must agree with). */
export const PLAIN_GRAMMAR: RegExp = PLAIN_FINISHING;

