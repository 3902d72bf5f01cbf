/**
 * Chunk parts and their texts: what is forwarded is always the JSON of the chunk as it is now
 * (checked by parsing it back), whether the saved text could be edited or had to be dropped; and
 * the plain grammar, which decides which texts need no parse at all.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { ChunkPart } from '../stream-part.ts';
import { detached, PLAIN_GRAMMAR, PlainHead } from './event-text.ts';

type Part = ChunkPart<Record<string, unknown>>;

function parsed(text: string): Part {
  return ChunkPart.parsed(JSON.parse(text) as Record<string, unknown>, text);
}

/** `text` as a plain part with a fresh head, or undefined. */
function plainOf(text: string, head = new PlainHead()): Part | undefined {
  return ChunkPart.plain<Record<string, unknown>>(text, head);
}

/** Removes usage the way pipeline-streams does, and returns what would be forwarded. */
function withoutUsage(text: string): string {
  const part = parsed(text);
  part.dropUsage();
  const out = part.json();
  assert.deepEqual(JSON.parse(out), part.chunk, `forwarded ${out}`);
  assert.equal('usage' in part.chunk, false);
  return out;
}

describe('chunk parts: the forwarded text', () => {
  test('an unchanged chunk is forwarded as the text it came in (spacing and number spelling kept)', () => {
    const text = '{"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}],"x":1.0, "y": 1E2}';
    assert.equal(parsed(text).json(), text);
  });

  test('chunks built here, and texts with line breaks, are printed', () => {
    assert.equal(ChunkPart.of({ a: 1 }).json(), '{"a":1}');
    const multi = '{"a":\n1}';
    assert.equal(parsed(multi).json(), '{"a":1}');
  });

  test('a chunk changed through edit() is printed as it is now; the text is the part\'s own', () => {
    const text = '{"a": 1}';
    const kept = parsed(text);
    const changed = parsed(text);
    changed.edit().a = 2;
    assert.equal(changed.json(), '{"a":2}');
    assert.equal(kept.json(), text);
    const plain = plainOf('{"id":"c","choices":[]}') as Part;
    plain.edit().id = 'd';
    assert.equal(plain.plain, false, 'an edited part is no longer plain');
    assert.equal(plain.json(), '{"id":"d","choices":[]}');
  });

  test('"usage":null is cut out in every position', () => {
    assert.equal(withoutUsage('{"id":"c","choices":[],"usage":null}'), '{"id":"c","choices":[]}');
    assert.equal(withoutUsage('{"usage":null,"id":"c","choices":[]}'), '{"id":"c","choices":[]}');
    assert.equal(withoutUsage('{"id":"c","usage":null,"choices":[]}'), '{"id":"c","choices":[]}');
    assert.equal(withoutUsage('{"usage":null}'), '{}');
  });

  test('anything less certain falls back to printing the chunk', () => {
    // spaced, so the compact form is not there
    assert.equal(withoutUsage('{"id":"c", "usage": null}'), '{"id":"c"}');
    // "usage" also inside a string: which occurrence is the key is not known from the text alone
    assert.equal(withoutUsage('{"choices":[{"delta":{"content":"say \\"usage\\":null"}}],"usage":null}'), '{"choices":[{"delta":{"content":"say \\"usage\\":null"}}]}');
    // a nested "usage":null, top-level usage spaced
    assert.equal(withoutUsage('{"meta":{"usage":null},"usage" :null}'), '{"meta":{"usage":null}}');
  });

  test('"usage":null is added last to a chunk without it, the text kept where it is plainly one object', () => {
    for (const [text, want] of [
      ['{"id":"c","choices":[]}', '{"id":"c","choices":[],"usage":null}'],
      ['{"id":"c", "choices":[]} ', '{"id":"c", "choices":[],"usage":null}'],
      ['{ }', '{"usage":null}'],
      ['{"id":"c","usage":{"total_tokens":1}}', '{"id":"c","usage":{"total_tokens":1}}'],
    ] as const) {
      const p = parsed(text);
      p.addUsageNull();
      assert.equal(p.json(), want, text);
      assert.deepEqual(JSON.parse(p.json()), p.chunk, text);
    }
  });

  test('detached: a copy that does not keep the (large) read it was cut from alive', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const MB = 1 << 20;
    const text = '{"id":"chatcmpl-abcdefghijklmnop","choices":[]}';
    /** MB of heap still held after `hold` kept a text cut from each of 40 fresh 1 MB reads */
    const heldMb = (hold: (t: string) => unknown): number => {
      const held: unknown[] = [];
      gc();
      const before = process.memoryUsage().heapUsed;
      for (let i = 0; i < 40; i++) {
        const read = `data: ${text}\n\n`.padEnd(MB, `${i}`); // one upstream read: a text, then more events
        held.push(hold(read.slice(6, 6 + text.length)));
      }
      gc();
      const mb = (process.memoryUsage().heapUsed - before) / MB;
      assert.equal(held.length, 40);
      return mb;
    };
    // the measurement works: plain slices keep their reads
    assert.ok(heldMb((t) => t) > 30, 'slices held their reads');
    const copy = heldMb((t) => detached(t));
    assert.ok(copy < 8, `detached copies held ${copy.toFixed(1)} MB`);
  });
});

describe('plain chunks: the grammar', () => {
  const chunk = (extra: Record<string, unknown> = {}, choice: Record<string, unknown> = {}): string =>
    JSON.stringify({
      id: 'chatcmpl-1',
      object: 'chat.completion.chunk',
      created: 1700000000,
      model: 'gpt-4o',
      system_fingerprint: 'fp_1',
      choices: [{ index: 0, delta: { content: 'Hello "world" \\ é 😀 \u0001' }, logprobs: null, finish_reason: null, ...choice }],
      ...extra,
    });

  test('ordinary content tokens are plain: OpenAI (usage null, obfuscation), completions, several choices, numbers', () => {
    const plain = [
      chunk(),
      chunk({ usage: null, obfuscation: 'aB3xY', service_tier: 'default' }),
      JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: 'm', choices: [{ text: ' the', index: 0, logprobs: null, finish_reason: null }] }),
      JSON.stringify({ id: 'x', choices: [{ index: 0, delta: { content: 'a' } }, { index: 1, delta: { role: 'assistant', content: '' } }] }),
      JSON.stringify({ id: 'x', n: -0.5e-3, m: 12, t: true, f: false, z: null, choices: [] }),
      '{"id":"x","s":"\\u00e9\\n\\t\\"\\/","choices":[{"delta":{}}]}',
    ];
    for (const t of plain) assert.equal(plainOf(t)?.finishes, false, t);
  });

  test('the finish chunk is plain and says it finishes; an empty finish_reason does not finish', () => {
    for (const t of [
      chunk({ usage: null }, { delta: {}, finish_reason: 'stop' }),
      chunk({}, { finish_reason: 'length' }),
      '{"id":"x","choices":[{"finish_reason":"stop","index":0,"delta":{}}]}',
      JSON.stringify({ id: 'cmpl-1', object: 'text_completion', choices: [{ text: '', index: 0, logprobs: null, finish_reason: 'stop' }] }),
    ])
      assert.equal(plainOf(t)?.finishes, true, t);
    assert.equal(plainOf(chunk({}, { finish_reason: '' }))?.finishes, false);
  });

  test('anything that decides something, or is not certainly valid JSON, is not plain', () => {
    const notPlain = [
      // a finish_reason other than a choice's own string
      chunk({ finish_reason: 'stop' }),
      chunk({}, { delta: { content: 'a', finish_reason: 'stop' } }),
      chunk({}, { finish_reason: 1 }),
      // a string finish_reason that is not the text's only one: the parsed chunk decides
      '{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{},"finish_reason":null}]}',
      '{"id":"x","choices":[{"finish_reason":"stop","finish_reason":null}]}',
      chunk({ usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } }),
      chunk({ error: { message: 'boom' } }),
      '{"error":"boom"}',
      chunk({}, { delta: { tool_calls: [{ index: 0, function: { arguments: '{' } }] } }),
      chunk({}, { logprobs: { content: [] } }),
      chunk({}, { delta: { content: 'x', error: 'nested' } }),
      // a key spelt with an escape is the same key to JSON.parse
      '{"id":"x","choices":[{"delta":{"content":"a"},"finish\\u005freason":"stop"}]}',
      '{"id":"x","choices":[{"finish_reason":null,"finish_reason":"stop"}]}',
      '{"id":"x","finish_reason":null,"choices":[{"finish_reason":"stop"}]}',
      // not certainly valid
      '{"id":"x", "choices":[]}',
      '{"id":"x","choices":[],}',
      '{"id":"x","choices":[{"delta":{"content":"a\u0001"}}]}',
      '{"id":"x","choices":[{"delta":{"content":"a\\x"}}]}',
      '{"id":"x","n":01,"choices":[]}',
      '{"id":"x","n":1.,"choices":[]}',
      '{"id":"x","choices":[{"delta":{"content":"a"}}]',
      '{"id":"x","choices":[{"delta":{"content":"a"}}]}}',
      '{"id":"x"}{"id":"y"}',
      '[{"id":"x"}]',
      '"x"',
      '{}',
      '{"id":"x","choices":[{"delta":{"content":"a"}}]}\n',
      '',
    ];
    for (const t of notPlain) assert.equal(plainOf(t), undefined, t);
  });

  test('property: every plain text parses to an object with no error and no usage, whose only non-null finish_reason is a choice\'s string, which `finishes` reports', () => {
    const seeds = [
      chunk(),
      chunk({ usage: null, obfuscation: 'q' }),
      '{"id":"x","choices":[{"delta":{"content":"a"},"finish_reason":null}],"usage":null}',
      chunk({ usage: null }, { delta: {}, finish_reason: 'stop' }),
    ];
    const alphabet = '{}[]:,"\\ nulltrefas0123456789.-+eEu_' + 'error' + 'finish_reason' + 'usage';
    let accepted = 0;
    let finishing = 0;
    fc.assert(
      fc.property(fc.constantFrom(...seeds), fc.array(fc.tuple(fc.nat(), fc.nat(), fc.string({ unit: fc.constantFrom(...alphabet), maxLength: 6 })), { maxLength: 4 }), (seed, edits) => {
        let t = seed;
        for (const [at, del, ins] of edits) {
          const i = at % (t.length + 1);
          t = t.slice(0, i) + ins + t.slice(i + (del % 4));
        }
        if (!plainOf(t)) return;
        accepted++;
        const v = JSON.parse(t) as Record<string, unknown>;
        assert.ok(typeof v === 'object' && v !== null && !Array.isArray(v));
        const p = plainOf(t) as Part;
        // a choice's own finish_reason may be a string; every other finish_reason, and every usage, is null
        const walk = (x: unknown, inChoice: boolean): void => {
          if (typeof x !== 'object' || x === null) return;
          for (const [k, y] of Object.entries(x)) {
            assert.notEqual(k, 'error', t);
            if (k === 'usage' || (k === 'finish_reason' && !inChoice)) assert.equal(y, null, t);
            if (k === 'finish_reason' && inChoice) assert.ok(y === null || typeof y === 'string', t);
            walk(y, false);
          }
        };
        const choices = Array.isArray(v.choices) ? (v.choices as unknown[]) : [];
        walk({ ...v, choices: undefined }, false);
        for (const c of choices) walk(c, true);
        assert.equal(p.finishes, choices.some((c) => !!(c as { finish_reason?: unknown }).finish_reason), t);
        if (p.finishes) finishing++;
      }),
      { numRuns: 20000 },
    );
    // not vacuous: many edited texts are still accepted (and then checked), finishing ones too
    assert.ok(accepted > 2000 && finishing > 500, `accepted ${accepted}, finishing ${finishing}`);
  });

  test('property: chunk-shaped JSON with any scalar values is plain exactly when it has no error, no usage and no finish_reason but null or a choice\'s only string one', () => {
    const key = fc.constantFrom('id', 'model', 'content', 'role', 'index', 'logprobs', 'obfuscation', 'error', 'finish_reason', 'usage');
    const scalar = fc.oneof(fc.string(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.boolean(), fc.constant(null));
    const flat = fc.dictionary(key, scalar, { maxKeys: 4 });
    const choice = fc.tuple(flat, fc.option(flat, { nil: undefined })).map(([c, delta]) => (delta === undefined ? c : { ...c, delta }));
    const top = fc.tuple(flat, fc.array(choice, { maxLength: 3 })).map(([t, choices]) => ({ ...t, choices }));
    fc.assert(
      fc.property(top, (v) => {
        const t = JSON.stringify(v);
        const decides = (o: Record<string, unknown>, finishMayBeText = false): boolean =>
          'error' in o || (o.usage ?? null) !== null || !((o.finish_reason ?? null) === null || (finishMayBeText && typeof o.finish_reason === 'string'));
        const inGrammar = !decides(v) && v.choices.every((c) => !decides(c, true) && !(c.delta && decides(c.delta as Record<string, unknown>)));
        const choices = v.choices as Record<string, unknown>[];
        const objects = [v, ...choices, ...choices.map((c) => c.delta ?? {})] as Record<string, unknown>[];
        const finishKeys = objects.filter((o) => 'finish_reason' in o).length;
        const textFinish = choices.some((c) => typeof c.finish_reason === 'string');
        const p = plainOf(t);
        assert.equal(!!p, inGrammar && (!textFinish || finishKeys === 1), t);
        if (p) assert.equal(p.finishes, choices.some((c) => !!c.finish_reason), t);
      }),
      { numRuns: 5000 },
    );
  });
});

describe('plain chunks: does the delta carry anything (the commit point)', () => {
  test('the role chunk and empty deltas carry nothing; a token, a reasoning token or a number does', () => {
    const chunk = (delta: string): Part => plainOf(`{"id":"c","choices":[{"index":0,"delta":{${delta}},"logprobs":null,"finish_reason":null}],"usage":null}`) as Part;
    for (const d of ['"role":"assistant","content":""', '"role":"assistant"', '', '"content":null,"refusal":null', '"role":null,"content":""']) assert.equal(chunk(d).deltaCarries(), false, d);
    for (const d of ['"role":"assistant","content":"Hi"', '"content":" "', '"reasoning_content":"hm"', '"x":0', '"x":false', '"content":"\\"\\u0000"']) assert.equal(chunk(d).deltaCarries(), true, d);
    // no delta, or two: the parsed chunk decides
    assert.equal((plainOf('{"choices":[{"index":0,"text":"a","finish_reason":null}]}') as Part).deltaCarries(), undefined);
    assert.equal((plainOf('{"choices":[{"index":0,"delta":{}},{"index":1,"delta":{"content":"a"}}]}') as Part).deltaCarries(), undefined);
  });

  test('property: on chunk-shaped JSON with one delta, it says what the parsed delta says', () => {
    const key = fc.constantFrom('role', 'content', 'refusal', 'reasoning_content', 'index', 'id', 'x');
    const scalar = fc.oneof(fc.constantFrom('', null, 'a', 0, false), fc.string(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean());
    const flat = fc.dictionary(key, scalar, { maxKeys: 4 });
    const top = fc.tuple(flat, flat, fc.array(fc.constant({ index: 1 }), { maxLength: 2 })).map(([t, delta, others]) => ({ ...t, choices: [{ index: 0, delta, finish_reason: null }, ...others] }));
    let carrying = 0;
    fc.assert(
      fc.property(top, (v) => {
        const t = JSON.stringify(v);
        const p = plainOf(t);
        assert.ok(p, t);
        const delta = (v.choices[0] as { delta: Record<string, unknown> }).delta;
        const expected = Object.entries(delta).some(([k, x]) => k !== 'role' && x !== null && x !== '');
        if (expected) carrying++;
        assert.equal(p.deltaCarries(), expected, t);
      }),
      { numRuns: 5000 },
    );
    assert.ok(carrying > 500 && carrying < 4500, `carrying ${carrying}`);
  });
});

describe('plain chunks: a stream\'s shared head', () => {
  test('property: with one PlainHead over a stream of edited texts, a text is plain exactly when it is with a fresh head (the whole grammar accepts it), and usage and finish read and drop as with a fresh head', () => {
    const seeds = [
      '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":"a"},"logprobs":null,"finish_reason":null}],"usage":null}',
      '{"usage":null,"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}',
      '{"id":"c","choices":[{"index":0,"finish_reason":null},{"index":1,"delta":{"role":"assistant","content":""}}]}',
      '{"id":"c","choices":[{"delta":{},"usage":null}],"usage":null,"x":1}',
    ];
    const alphabet = '{}[]:,"\\ nulltrefas0123456789.-+eEu_' + 'error' + 'finish_reason' + 'usage' + 'delta';
    const edit = fc.tuple(fc.nat(), fc.nat(), fc.string({ unit: fc.constantFrom(...alphabet), maxLength: 6 }), fc.boolean());
    let plain = 0;
    let viaHead = 0;
    fc.assert(
      fc.property(fc.constantFrom(...seeds), fc.array(fc.array(edit, { maxLength: 3 }), { minLength: 1, maxLength: 8 }), (seed, stream) => {
        const head = new PlainHead();
        for (const edits of stream) {
          let t = seed;
          for (const [at, del, ins, tailOnly] of edits) {
            // most edits touch only what follows the delta's opening, as a stream's tokens do
            const from = tailOnly ? t.indexOf('"delta":{') + 9 : 0;
            const i = from + (at % (t.length - from + 1));
            t = t.slice(0, i) + ins + t.slice(i + (del % 4));
          }
          const before = head.text;
          const p = plainOf(t, head);
          const fresh = plainOf(t);
          assert.equal(!!p, !!fresh, t);
          // the whole grammar accepts every plain text; it refuses only a string finish_reason that is not the only one
          if (p) assert.ok(PLAIN_GRAMMAR.test(t), t);
          else if (PLAIN_GRAMMAR.test(t)) assert.ok(t.includes('"finish_reason":"') && t.split('"finish_reason"').length > 2, t);
          if (!p || !fresh) continue;
          plain++;
          if (before !== '' && t.startsWith(before)) viaHead++;
          assert.equal(p.usage(), fresh.usage(), t);
          assert.equal(p.finishes, fresh.finishes, t);
          p.dropUsage();
          fresh.dropUsage();
          assert.equal(p.json(), fresh.json(), t);
          const { usage: _, ...rest } = JSON.parse(t) as Record<string, unknown>;
          assert.deepEqual(JSON.parse(p.json()), rest, t);
        }
      }),
      { numRuns: 5000 },
    );
    // not vacuous: many texts were plain, many of them through a known head
    assert.ok(plain > 5000 && viaHead > 2000, `plain ${plain}, via the known head ${viaHead}`);
  });

  test('a stream of ordinary tokens is checked through its head; a text that only looks like one is still refused', () => {
    const head = new PlainHead();
    const tok = (c: string): string => `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":${JSON.stringify(c)}},"finish_reason":null}],"usage":null}`;
    for (const c of ['Hel', 'lo', ' "w"', '}]}', '\\']) assert.ok(plainOf(tok(c), head), c);
    assert.equal(head.text, tok('x').slice(0, tok('x').indexOf('"delta":{') + 9));
    assert.equal(plainOf(`${head.text}"content":"a"},"finish_reason":"stop"}],"usage":null}`, head)?.finishes, true);
    assert.equal(plainOf(`${head.text}"content":"a"},"finish_reason":"stop"}],"usage":{"total_tokens":1}}`, head), undefined);
    assert.equal(plainOf(`${head.text}"content":"a"}],"usage":null}`, head), undefined); // the choice not closed
    assert.equal(plainOf(`${head.text}"content":{"a":1}}}],"usage":null}`, head), undefined); // nested deeper
    assert.equal(plainOf(`${head.text}"content":"a"},"error":null}],"usage":null}`, head), undefined);
  });
});

describe('plain chunks: forwarding', () => {
  test('forwarded as the text it came in; read as the chunk; printed as the chunk', () => {
    const text = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"usage":null}';
    const p = plainOf(text);
    assert.ok(p);
    assert.equal(p.json(), text);
    assert.deepEqual(p.chunk.choices, [{ index: 0, delta: { content: 'hi' }, finish_reason: null }]);
    assert.equal(p.chunk.model, 'm');
    assert.equal(p.usage(), null);
    assert.equal(JSON.stringify(p.chunk), text);
  });

  test('dropping "usage":null cuts it out of the text, wherever it stands; a text without it is unchanged', () => {
    for (const text of ['{"usage":null,"id":"c","choices":[]}', '{"id":"c","usage":null,"choices":[]}', '{"id":"c","choices":[],"usage":null}', '{"id":"c","choices":[]}']) {
      const p = plainOf(text);
      assert.ok(p, text);
      p.dropUsage();
      assert.deepEqual(JSON.parse(p.json()), { id: 'c', choices: [] });
      assert.equal(p.usage(), undefined);
    }
  });

  test('only the top-level "usage":null is dropped: a choice\'s or a delta\'s own stays', () => {
    for (const [text, want] of [
      ['{"id":"c","choices":[{"delta":{},"usage":null}]}', '{"id":"c","choices":[{"delta":{},"usage":null}]}'],
      ['{"id":"c","choices":[{"delta":{"usage":null}}],"usage":null}', '{"id":"c","choices":[{"delta":{"usage":null}}]}'],
      ['{"usage":null,"choices":[{"usage":null,"delta":{}}]}', '{"choices":[{"usage":null,"delta":{}}]}'],
      ['{"usage":null}', '{}'],
    ] as const) {
      const p = plainOf(text);
      assert.ok(p, text);
      p.dropUsage();
      assert.deepEqual(JSON.parse(p.json()), JSON.parse(want), text);
    }
  });

  test('two "usage" members (a duplicate key): the chunk is printed without usage', () => {
    const p = plainOf('{"id":"c","usage":null,"choices":[],"usage":null}');
    assert.ok(p);
    p.dropUsage();
    assert.deepEqual(JSON.parse(p.json()), { id: 'c', choices: [] });
  });
});
