/**
 * Generated inputs for the translation properties (test/translation-*.test.ts): a client's prompt
 * (system, user text, an earlier tool round trip) and the upstream's scripted answer (reasoning and
 * text deltas, tool calls with streamed argument fragments, usage, the upstream's JSON spelling and
 * layout, SSE framing and vendor quirks, byte cuts).
 *
 * Text is drawn from all of Unicode (fast-check's `binary` unit: every code point, astral planes
 * included) mixed with fragments that break naive code: JSON and SSE syntax, escapes, `%XX` URL
 * escapes, control characters, U+2028/U+2029, BOM, combining marks, emoji sequences. Lone
 * surrogates are left out: they cannot be written in UTF-8, so no upstream sends them and no
 * client could receive them (`binary` never makes one; `assertWellFormed` guards the rest).
 * Deltas are split at code-point boundaries; splits inside a character's UTF-8 bytes are the
 * byte cuts of the upstream's writes (ScriptedAnswer.cuts).
 */
import fc from 'fast-check';
import type { Escaping, Framing, Layout, ScriptedAnswer, ScriptedTool, ScriptedUsage } from './scripted-wire.ts';

export type Ingress = 'chat' | 'completions' | 'responses' | 'messages';
export type Backend = 'openai' | 'anthropic' | 'responses' | 'llama';

export interface HistoryCall {
  id: string;
  name: string;
  /** the arguments' JSON text */
  args: string;
  /** the tool's output sent back */
  result: string;
}

export interface Prompt {
  /** '' = no system prompt */
  system: string;
  user: string;
  history: HistoryCall | undefined;
  /** the user text and the tool result as one text part (block) instead of a string */
  parts: boolean;
}

export interface Scenario {
  prompt: Prompt;
  answer: ScriptedAnswer;
  /** also read the stream through the vendor SDK's accumulator (a second request) */
  sdk: boolean;
}

const CONTROL = Array.from({ length: 32 }, (_, i) => String.fromCharCode(i));

/** Fragments that break code which treats text as anything but opaque Unicode. */
export const NASTY: readonly string[] = [
  ...CONTROL,
  '"', '\\', '\\\\', '\\"', '/', '\u007f', '\u0085', '\u00a0', '\u2028', '\u2029', '\ufeff', '\ufffd', '\uffff',
  '%', '%41', '50%41 off', '%25', '%E2%82%AC', '%u0041', '%%', '%zz',
  '\\u0041', '\\ud83d', '\\n', '\\t', 'u00e9', '\\/', '&amp;', '&#x41;',
  'data: ', 'data:', 'data: [DONE]', '\n\ndata: [DONE]\n\n', '\r\n\r\n', 'event: error\n', 'event: ping\ndata: {}\n\n', ': comment\n', 'id: 1\n', 'retry: 0\n',
  '{"a":1}', '"}', '"},{"', '{"error":{"message":"x"}}', '[DONE]', 'null', ']', '}', '{',
  '"content":"', '"delta":{', '"usage":{"prompt_tokens":1}', '"finish_reason":"stop"',
  '</script>', '<|endoftext|>', '${x}', '`',
  'é', 'e\u0301', '\u0301', 'ß', 'İ', 'ﬀ', '日本語', 'Ω', '\u200d', '\u200b', '\u202e',
  '😀', '👍🏽', '👩‍👩‍👧', '🇺🇳', '𝕏', '𠀀', '\u{10ffff}', '\u{e0001}', '\u{1f600}\u0301',
];

const fragment: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 12 }) },
  { weight: 3, arbitrary: fc.constantFrom(...NASTY) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 6 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 10 }) },
);

/** Any text: fragments joined. */
export const anyText = (maxFragments = 10): fc.Arbitrary<string> => fc.array(fragment, { maxLength: maxFragments }).map((fs) => fs.join(''));

/** A text cut into deltas: as generated, one per code point, or one piece. */
const deltas: fc.Arbitrary<string[]> = fc.oneof(
  { weight: 4, arbitrary: fc.array(fragment, { maxLength: 10 }) },
  { weight: 1, arbitrary: anyText(6).map((t) => [...t]) },
  { weight: 1, arbitrary: anyText(8).map((t) => (t === '' ? [] : [t])) },
);

/** `text` cut at code-point boundaries: at the given fractions, or after every code point. */
export function splitText(text: string, cuts: number[] | 'each'): string[] {
  const points = [...text];
  if (cuts === 'each') return points;
  const at = [...new Set(cuts.map((c) => Math.floor(c * points.length)))].filter((p) => p > 0).sort((a, b) => a - b);
  const out: string[] = [];
  let from = 0;
  for (const p of [...at, points.length]) {
    out.push(points.slice(from, p).join(''));
    from = p;
  }
  return out.filter((s, i) => s !== '' || i === 0);
}

const unit = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });
const splits: fc.Arbitrary<number[] | 'each'> = fc.oneof(fc.array(unit, { maxLength: 6 }), fc.constant<'each'>('each'));

const NAME_CHARS = [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-'];
/** A function name as OpenAI and Anthropic allow them: ^[a-zA-Z0-9_-]{1,64}$. */
export const toolName = fc.string({ unit: fc.constantFrom(...NAME_CHARS), minLength: 1, maxLength: 64 });
/** A tool call id Anthropic accepts (^[a-zA-Z0-9_-]+$). */
export const safeId = fc.tuple(fc.constantFrom('call_', 'toolu_', 'fc-', ''), fc.string({ unit: fc.constantFrom(...NAME_CHARS), minLength: 1, maxLength: 40 })).map(([p, s]) => p + s);
/** OpenAI-compatible vendors' ids are wider (Kimi: `functions.get_weather:0`). */
const wideId = fc.oneof(safeId, fc.tuple(toolName, fc.nat(9)).map(([n, i]) => `functions.${n}:${i}`));

const jsonKey = fc.oneof(anyText(3), fc.constantFrom('__proto__', 'constructor', '', 'a', 'toString'));
const jsonLeaf: fc.Arbitrary<unknown> = fc.oneof(anyText(4), fc.integer(), fc.boolean(), fc.constant(null), fc.double({ noNaN: true, noDefaultInfinity: true }));
const jsonValue: fc.Arbitrary<unknown> = fc.letrec<{ v: unknown }>((tie) => ({
  v: fc.oneof({ depthSize: 'small', withCrossShrink: true }, jsonLeaf, fc.array(tie('v'), { maxLength: 3 }), fc.dictionary(jsonKey, tie('v'), { maxKeys: 3 })),
})).v;
/** A tool's arguments: a JSON object's text, compact or indented as a model may write it. */
export const argsText: fc.Arbitrary<string> = fc
  .tuple(fc.dictionary(jsonKey, jsonValue, { maxKeys: 4 }), fc.constantFrom<undefined | number | string>(undefined, undefined, 1, ' ', '\t'))
  .map(([obj, indent]) => JSON.stringify(obj, null, indent));

const tool = (id: fc.Arbitrary<string>): fc.Arbitrary<ScriptedTool> =>
  fc.record({ id, name: toolName, text: argsText, cuts: splits }).map(({ id, name, text, cuts }) => ({ id, name, args: splitText(text, cuts) }));

const usage: fc.Arbitrary<ScriptedUsage> = fc
  .record({ input: fc.integer({ min: 1, max: 200_000 }), output: fc.integer({ min: 0, max: 100_000 }), cachedShare: unit, writtenShare: unit })
  .map(({ input, output, cachedShare, writtenShare }) => {
    const cached = Math.floor(input * cachedShare);
    return { input, output, cached, written: Math.floor((input - cached) * writtenShare) };
  });

const framing: fc.Arbitrary<Framing> = fc.record({
  escaping: fc.constantFrom<Escaping>('plain', 'plain', 'ascii', 'verbose'),
  layout: fc.constantFrom<Layout>('compact', 'compact', 'spaced', 'lines'),
  eol: fc.constantFrom<'\n' | '\r\n'>('\n', '\n', '\n', '\r\n'),
  space: fc.boolean(),
  obfuscation: fc.boolean(),
  fullDeltaUsage: fc.boolean(),
  toolChunks: fc.constantFrom<Framing['toolChunks']>('named', 'named', 'first-fragment', 'whole'),
  usageOnFinish: fc.boolean(),
  comments: fc.boolean(),
  nullMembers: fc.boolean(),
});

const cuts: fc.Arbitrary<number[]> = fc.oneof(
  { weight: 1, arbitrary: fc.constant<number[]>([]) },
  { weight: 4, arbitrary: fc.array(unit, { maxLength: 40 }) },
  { weight: 1, arbitrary: fc.array(unit, { minLength: 100, maxLength: 400 }) },
);

const prompt: fc.Arbitrary<Prompt> = fc.record({
  system: fc.oneof(fc.constant(''), anyText(4)),
  user: anyText(6).filter((t) => t.trim() !== ''),
  history: fc.option(fc.record({ id: safeId, name: toolName, args: argsText, result: anyText(4).filter((t) => t.trim() !== '') }), { nil: undefined }),
  parts: fc.boolean(),
});

/** What each backend's protocol can carry: cache writes are Anthropic's, llama-server reports no cache reads. */
function fitUsage(u: ScriptedUsage, backend: Backend): ScriptedUsage {
  if (backend === 'anthropic') return u;
  return { ...u, written: 0, cached: backend === 'llama' ? 0 : u.cached };
}

export function scenario(ingress: Ingress, backend: Backend): fc.Arbitrary<Scenario> {
  const tools: fc.Arbitrary<ScriptedTool[]> = ingress === 'completions' ? fc.constant([]) : fc.uniqueArray(tool(backend === 'anthropic' ? safeId : wideId), { maxLength: 3, selector: (t) => t.id });
  const answer: fc.Arbitrary<ScriptedAnswer> = fc
    .record({ reasoning: ingress === 'completions' ? fc.constant<string[]>([]) : fc.oneof({ weight: 2, arbitrary: fc.constant<string[]>([]) }, { weight: 1, arbitrary: deltas }), text: deltas, tools, usage, stop: fc.constantFrom<'stop' | 'length'>('stop', 'stop', 'length'), framing, cuts })
    .map((a) => ({ ...a, usage: fitUsage(a.usage, backend) }));
  return fc.record({ prompt, answer, sdk: fc.boolean() });
}

/** Fails on a lone surrogate: such a string cannot be written as UTF-8. */
export function assertWellFormed(s: string, where: string): void {
  // With the `u` flag a surrogate pair is one code point: \p{Cs} matches only a lone half.
  if (/\p{Cs}/u.test(s)) throw new Error(`${where}: a generated string with a lone surrogate`);
}

/** A hand-written scenario (regression tests): `answer` fields over an upstream with no quirks. */
export function plainScenario(answer: Partial<Omit<ScriptedAnswer, 'framing'>> & { framing?: Partial<Framing> }, p: Partial<Prompt> = {}, sdk = false): Scenario {
  const framing: Framing = {
    escaping: 'plain',
    layout: 'compact',
    eol: '\n',
    space: true,
    obfuscation: false,
    fullDeltaUsage: false,
    toolChunks: 'named',
    usageOnFinish: false,
    comments: false,
    nullMembers: false,
    ...answer.framing,
  };
  return {
    prompt: { system: '', user: 'hi', history: undefined, parts: false, ...p },
    answer: { reasoning: [], text: [], tools: [], usage: { input: 10, cached: 0, written: 0, output: 5 }, stop: 'stop', cuts: [], ...answer, framing },
    sdk,
  };
}

/** Every NASTY fragment in one scenario: deltas, argument values, prompt and tool result; the body in 150 pieces. */
export const NASTY_FRAMINGS: ReadonlyArray<Partial<Framing>> = [
  { escaping: 'plain', layout: 'compact' },
  { escaping: 'ascii', layout: 'spaced', eol: '\r\n', nullMembers: true, toolChunks: 'first-fragment' },
  { escaping: 'verbose', layout: 'lines', space: false, comments: true, toolChunks: 'whole', usageOnFinish: true, fullDeltaUsage: true },
];

export function nastyScenario(framing: Partial<Framing>, ingress: Ingress, backend: Backend): Scenario {
  const full = ingress !== 'completions'; // legacy completions carry neither tools nor reasoning
  const all = NASTY.join('');
  const args = JSON.stringify(Object.fromEntries(NASTY.map((s, i) => [s, i % 2 === 0 ? s : [s, { [s]: s }]])));
  const cuts = Array.from({ length: 150 }, (_, i) => i / 150);
  const usage = fitUsage({ input: 1000, cached: 300, written: 200, output: 77 }, backend);
  return plainScenario(
    { reasoning: full ? [...NASTY].reverse() : [], text: [...NASTY], tools: full ? [{ id: 'call_nasty-1', name: 'nasty_tool', args: splitText(args, 'each') }] : [], usage, cuts, framing },
    { system: all, user: all, parts: true, history: full ? { id: 'call_prior', name: 'prior', args, result: all } : undefined },
    true,
  );
}
