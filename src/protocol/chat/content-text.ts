/**
 * The content fragment of a plain chat chunk read from its text, still JSON-escaped: what a
 * translated stream (Responses, Messages) needs from an ordinary token, without parsing the chunk
 * and printing the fragment again. The fragment is a JSON string's body as the upstream wrote it,
 * so it goes into the translated event's text as it is.
 *
 * Only for a text that plainScan (event-text.ts) accepted: compact JSON in the plain grammar, keys
 * without escapes, `choices[].delta` the only objects, usage null or absent, no error. On such a
 * text `"delta":{` stands only as the delta key (a string of the grammar holds no bare quote).
 */

const DELTA_OPEN = '"delta":{';
const CONTENT_MEMBER = '"content":"';
const QUOTE = 34;
const BACKSLASH = 92;
const COMMA = 44;
const BRACE_OPEN = 123;
const BRACE_CLOSE = 125;
const BRACKET_OPEN = 91;
const BRACKET_CLOSE = 93;

/**
 * What the last chunks of a stream were found to be, so that the next are compared rather than
 * checked again: the text before the delta (up to and including `"delta":{`) of a chunk with one
 * choice, and the text after its delta.
 */
export class ContentHead {
  text = '';
  /** the text after the delta of the last chunk read, found flat (FLAT_TAIL) */
  tail = '';
}

/** The index of the quote that closes the string whose opening quote is at `open`, or -1. */
function stringEnd(t: string, open: number): number {
  let q = t.indexOf('"', open + 1);
  while (q > 0) {
    let b = q - 1;
    while (t.charCodeAt(b) === BACKSLASH) b--;
    if ((q - 1 - b) % 2 === 0) return q; // an even run of backslashes escapes only themselves
    q = t.indexOf('"', q + 1);
  }
  return -1;
}

/**
 * Whether `t[0, end)` opens exactly the chunk, `choices` and one choice and closes nothing: the
 * delta that follows belongs to the chunk's first choice and no choice stands before it.
 */
function oneChoiceHead(t: string, end: number): boolean {
  let opens = 0;
  for (let i = 0; i < end; i++) {
    const c = t.charCodeAt(i);
    if (c === QUOTE) {
      i = stringEnd(t, i);
      if (i < 0) return false;
    } else if (c === BRACE_OPEN || c === BRACKET_OPEN) {
      opens++;
    } else if (c === BRACE_CLOSE || c === BRACKET_CLOSE) {
      return false;
    }
  }
  return opens === 3;
}

/**
 * A text (after a delta, in the plain grammar) in which nothing opens an object or an array
 * outside strings: no second choice, no nested value.
 */
const FLAT_TAIL = /^[^"{[]*(?:"(?:[^"\\]|\\.)*"[^"{[]*)*$/;

/**
 * The escaped content of a plain chunk (accepted by plainScan, not finishing) whose one choice's
 * delta carries a non-empty `content` string and nothing else for the client (`role`, and members
 * that are null or ""); undefined for anything else (parse the chunk). `head`: the stream's.
 */
export function plainContent(t: string, head: ContentHead): string | undefined {
  let i: number;
  const known = head.text;
  if (known !== '' && t.length > known.length && t.slice(0, known.length) === known) {
    i = known.length;
  } else {
    const at = t.indexOf(DELTA_OPEN);
    if (at < 0 || !oneChoiceHead(t, at)) return undefined;
    i = at + DELTA_OPEN.length;
    head.text = (' ' + t.slice(0, i)).slice(1); // a copy: the head outlives this chunk's read
  }
  let content: string | undefined;
  for (;;) {
    // a member: a key without escapes, a colon, a scalar
    if (t.charCodeAt(i) !== QUOTE) return undefined;
    let end: number;
    if (t.slice(i, i + CONTENT_MEMBER.length) === CONTENT_MEMBER) {
      const v = i + CONTENT_MEMBER.length - 1;
      const close = stringEnd(t, v);
      if (close < 0 || content !== undefined || close === v + 1) return undefined;
      content = t.slice(v + 1, close);
      end = close + 1;
    } else {
      const keyEnd = t.indexOf('"', i + 1);
      if (keyEnd < 0) return undefined;
      const role = keyEnd - i === 5 && t.startsWith('"role"', i);
      const v = keyEnd + 2; // past `":`
      if (t.charCodeAt(v) === QUOTE) {
        const close = stringEnd(t, v);
        if (close < 0 || (!role && close !== v + 1)) return undefined; // only role may say something
        end = close + 1;
      } else {
        end = v;
        while (end < t.length && t.charCodeAt(end) !== COMMA && t.charCodeAt(end) !== BRACE_CLOSE) end++;
        if (!role && (end - v !== 4 || !t.startsWith('null', v))) return undefined;
      }
    }
    const c = t.charCodeAt(end);
    if (c === COMMA) {
      i = end + 1;
      continue;
    }
    if (c !== BRACE_CLOSE) return undefined;
    if (content === undefined) return undefined;
    const tail = t.slice(end + 1);
    if (tail !== head.tail) {
      if (!FLAT_TAIL.test(tail)) return undefined;
      head.tail = (' ' + tail).slice(1); // a copy, as the head's
    }
    return content;
  }
}
