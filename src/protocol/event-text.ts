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
  const t = ringTexts[slot] as string;
  const i = t.indexOf(USAGE_KEY);
  if (i < 0 || t.indexOf(USAGE_KEY, i + 1) >= 0 || !t.startsWith(USAGE_NULL, i)) {
    forget(slot);
    return;
  }
  const end = i + USAGE_NULL.length;
  if (t[i - 1] === ',') ringTexts[slot] = t.slice(0, i - 1) + t.slice(end);
  else if (t[end] === ',') ringTexts[slot] = t.slice(0, i) + t.slice(end + 1);
  else ringTexts[slot] = t.slice(0, i) + t.slice(end);
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
