/**
 * What a scripted upstream answers (`ScriptedAnswer`: reasoning, text, tool calls, usage, how it
 * stops) and how it writes it (`Framing`: JSON spelling and layout, SSE framing, vendor quirks;
 * `cuts`: where its body's bytes are split into writes), with the JSON and SSE writers the bodies
 * (scripted-bodies.ts) are printed with.
 */

export interface ScriptedTool {
  id: string;
  name: string;
  /** the arguments' JSON text as the upstream streams it, in deltas (joined: the whole text) */
  args: string[];
}

export interface ScriptedUsage {
  /** prompt tokens, cached and cache writes included (OpenAI's `prompt_tokens`) */
  input: number;
  /** prompt tokens read from the prompt cache */
  cached: number;
  /** prompt tokens written to the prompt cache (Anthropic only; 0 elsewhere) */
  written: number;
  output: number;
}

/** How the upstream's JSON writer spells strings; every style is valid JSON for the same values. */
export type Escaping = 'plain' | 'ascii' | 'verbose';

/**
 * Whitespace in the upstream's JSON: none, Python's `json.dumps` separators (`, ` and `: `), or a
 * line break after every comma (an SSE event's data then spans several `data:` lines).
 */
export type Layout = 'compact' | 'spaced' | 'lines';

export interface Framing {
  escaping: Escaping;
  layout: Layout;
  /** SSE line ends: `\n`, or `\r\n` (sse-starlette's default) */
  eol: '\n' | '\r\n';
  /** `data: x` or `data:x` (both mean the same) */
  space: boolean;
  /** OpenAI's `obfuscation` padding member on content chunks */
  obfuscation: boolean;
  /** Anthropic: usage in message_delta also names the input counts (newer API versions) */
  fullDeltaUsage: boolean;
  /**
   * How a chat stream carries a tool call: `named` (OpenAI: id and name with empty arguments, then
   * fragments), `first-fragment` (the first fragment beside the name: vLLM), `whole` (every call
   * complete in one chunk: Gemini's OpenAI-compatible API).
   */
  toolChunks: 'named' | 'first-fragment' | 'whole';
  /** a chat stream's usage on the finishing chunk instead of a chunk of its own (DeepSeek) */
  usageOnFinish: boolean;
  /** an SSE comment line before every event (OpenRouter's `: OPENROUTER PROCESSING`) */
  comments: boolean;
  /** DeepSeek's chat deltas: the members a chunk does not use present as null */
  nullMembers: boolean;
}

export interface ScriptedAnswer {
  /** reasoning before the answer, in deltas ([]: none): `reasoning_content`, a thinking block, a reasoning item */
  reasoning: string[];
  /** the text in content deltas (joined: the whole text; may be empty) */
  text: string[];
  tools: ScriptedTool[];
  usage: ScriptedUsage;
  /** why the model stopped when it calls no tool */
  stop: 'stop' | 'length';
  framing: Framing;
  /**
   * Where the body's bytes are cut into separate writes: numbers in [0, 1) spread over the body;
   * even entries land inside a multi-byte UTF-8 sequence when the body has one.
   */
  cuts: number[];
}

export type Flavour = 'openai' | 'llama';

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const SHORT_ESCAPES: Readonly<Record<string, number>> = { n: 10, r: 13, t: 9, b: 8, f: 12 };

/** The signature the scripted Anthropic upstream gives its thinking blocks. */
export const UPSTREAM_SIGNATURE = 'EqQBCkYIBxgCKkBscripted+/=';

function laidOut(value: Json, layout: Layout): string {
  if (layout === 'compact') return JSON.stringify(value);
  const comma = layout === 'spaced' ? ', ' : ',\n';
  const go = (v: Json): string => {
    if (v === null || typeof v !== 'object') return JSON.stringify(v);
    if (Array.isArray(v)) return `[${v.map(go).join(comma)}]`;
    return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${go(x)}`).join(comma)}}`;
  };
  return go(value);
}

/** `JSON.stringify` with the answer's whitespace and string spelling. */
export function writeJson(value: Json, f: Pick<Framing, 'escaping' | 'layout'>): string {
  const escaping = f.escaping;
  const text = laidOut(value, f.layout);
  if (escaping === 'plain') return text;
  // Outside strings a JSON text is ASCII with no backslash or `/`, so these replacements change
  // only how string contents are spelt. ascii: every non-ASCII UTF-16 unit as `\uxxxx` (Python's
  // ensure_ascii; an astral character becomes its surrogate pair's two escapes).
  const ascii = text.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  if (escaping === 'ascii') return ascii;
  // verbose: also upper-case hex, `\u00XX` for the short escapes but `\\` and `\"`, and `\/`. Each
  // escape sequence is matched whole, so `\\` followed by `n` stays a backslash and an `n`.
  return ascii.replace(/\\(u[0-9a-f]{4}|.)|\//g, (m: string, esc: string | undefined) => {
    if (esc === undefined) return '\\/';
    if (esc.startsWith('u')) return `\\u${esc.slice(1).toUpperCase()}`;
    const code = SHORT_ESCAPES[esc];
    return code === undefined ? m : `\\u${code.toString(16).toUpperCase().padStart(4, '0')}`;
  });
}

/** The answer's whole text. */
export function joined(a: ScriptedAnswer): string {
  return a.text.join('');
}

/** A tool call's whole arguments text. */
export function argsOf(t: ScriptedTool): string {
  return t.args.join('');
}

/** The chat finish reason of the answer. */
export function finish(a: ScriptedAnswer): 'stop' | 'length' | 'tool_calls' {
  return a.tools.length > 0 ? 'tool_calls' : a.stop;
}

/** An SSE body, event by event, in the answer's framing. */
export class Sse {
  readonly parts: string[] = [];
  constructor(private readonly f: Framing) {}
  event(name: string | undefined, data: Json | string): void {
    const d = typeof data === 'string' ? data : writeJson(data, this.f);
    const { eol } = this.f;
    const sp = this.f.space ? ' ' : '';
    if (this.f.comments) this.parts.push(`: keep-alive${eol}${eol}`);
    const lines = d.split('\n').map((line) => `data:${sp}${line}${eol}`);
    this.parts.push(`${name === undefined ? '' : `event:${sp}${name}${eol}`}${lines.join('')}${eol}`);
  }
  text(): string {
    return this.parts.join('');
  }
}

/** Cut positions for a body: `cuts` spread over it, even ones moved inside multi-byte sequences. */
export function cutPoints(body: Buffer, cuts: number[]): number[] {
  const inner: number[] = [];
  for (let i = 1; i < body.length; i++) if ((body[i]! & 0xc0) === 0x80) inner.push(i);
  const points = cuts.map((c, i) => (i % 2 === 0 && inner.length > 0 ? inner[Math.floor(c * inner.length)]! : 1 + Math.floor(c * (body.length - 1))));
  return [...new Set(points)].filter((p) => p > 0 && p < body.length).sort((x, y) => x - y);
}
