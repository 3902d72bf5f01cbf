/**
 * Reading a plain token's content from its text: what it returns is exactly what the parsed chunk
 * holds (checked on generated chunks against JSON.parse), and anything that is not one choice's
 * bare content fragment is left to the parsed path.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { ChunkPart } from '../stream-part.ts';
import { ContentHead, plainContent } from './content-text.ts';
import { PlainHead } from './event-text.ts';

type Chunk = { choices?: Array<{ index?: number; delta?: Record<string, unknown>; finish_reason?: unknown }> };

/** plainContent as the gateway calls it: only on a plain, non-finishing part. */
function contentOf(text: string, head = new ContentHead()): string | undefined {
  const part = ChunkPart.plain<Chunk>(text, new PlainHead());
  if (!part || part.finishes) return undefined;
  return plainContent(text, head);
}

const decode = (escaped: string): string => JSON.parse(`"${escaped}"`) as string;

const openai = (content: string, extra = ''): string =>
  `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}${extra}},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x}]{"}`;

describe('plainContent', () => {
  test('an OpenAI token, a llama-server token: the escaped fragment as the upstream wrote it', () => {
    assert.equal(contentOf(openai('Hel')), 'Hel');
    assert.equal(contentOf(openai('a "quote", a \\ and\na line}')), 'a \\"quote\\", a \\\\ and\\na line}');
    assert.equal(contentOf('{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"caf\\u00e9 \\ud83d\\ude00"}}],"created":1,"id":"c","model":"m","object":"chat.completion.chunk"}'), 'caf\\u00e9 \\ud83d\\ude00');
    assert.equal(decode(contentOf(openai('caf\u00e9 \u{1F600}')) ?? ''), 'caf\u00e9 \u{1F600}');
  });

  test('role, null and empty members beside the content are nothing for the client', () => {
    assert.equal(contentOf(openai('x', ',"role":"assistant","refusal":null,"reasoning_content":""')), 'x');
  });

  test('anything else is left to the parsed chunk', () => {
    const refused = [
      openai(''), // nothing to say
      openai('x', ',"reasoning_content":"y"'), // two kinds of news
      openai('x', ',"refusal":"no"'),
      openai('x', ',"content":"y"'), // a repeated key (the parse keeps the last)
      '{"id":"c","choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}', // two choices
      '{"id":"c","choices":[{"index":1,"finish_reason":null},{"index":0,"delta":{"content":"b"}}]}', // a choice before
      '{"id":"c","choices":[{"index":0,"delta":{"role":"assistant"}}]}', // no content
      '{"id":"c","choices":[{"index":0,"delta":{"content":null}}]}',
      '{"id":"c","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}', // the finish
    ];
    for (const t of refused) assert.equal(contentOf(t), undefined, t);
  });

  test('the head is checked once per stream and then compared; a new head is checked again', () => {
    const head = new ContentHead();
    assert.equal(contentOf(openai('a'), head), 'a');
    const known = head.text;
    assert.ok(known.endsWith('"delta":{'));
    assert.equal(contentOf(openai('b'), head), 'b');
    assert.equal(head.text, known);
    const two = '{"id":"chatcmpl-1","choices":[{"index":1,"finish_reason":null},{"index":0,"delta":{"content":"b"}}]}';
    assert.equal(contentOf(two, head), undefined);
    assert.equal(head.text, known);
  });

  test('on generated chunks: a fragment is returned only for one choice whose delta says only that', () => {
    const scalar = fc.oneof(fc.constant(null), fc.constant(''), fc.string({ maxLength: 6 }), fc.integer(), fc.boolean());
    const key = fc.constantFrom('content', 'role', 'refusal', 'reasoning_content', 'x');
    const delta = fc.dictionary(key, scalar, { maxKeys: 3 });
    const choice = fc.record({ index: fc.integer({ min: 0, max: 2 }), delta, logprobs: fc.constant(null), finish_reason: fc.constantFrom(null, 'stop') }, { requiredKeys: ['index'] });
    const chunk = fc.record({ id: fc.string({ maxLength: 8 }), choices: fc.array(choice, { maxLength: 3 }), usage: fc.constant(null), note: fc.string({ maxLength: 8 }) }, { requiredKeys: ['choices'] });
    fc.assert(
      fc.property(chunk, (c) => {
        const text = JSON.stringify(c);
        const got = contentOf(text);
        if (got === undefined) return;
        const parsed = JSON.parse(text) as Chunk;
        assert.equal(parsed.choices?.length, 1, text);
        const only = parsed.choices?.[0];
        assert.ok(only?.finish_reason === null || only?.finish_reason === undefined, text);
        const d = only?.delta ?? {};
        assert.equal(d.content, decode(got), text);
        assert.notEqual(d.content, '');
        for (const [k, v] of Object.entries(d)) assert.ok(k === 'content' || k === 'role' || v === null || v === '', `${k} in ${text}`);
      }),
      { numRuns: 3000 },
    );
  });

  test('every ordinary token of one choice is read (none left to the parse)', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 20 }), (s) => {
        const got = contentOf(openai(s));
        assert.ok(got !== undefined, JSON.stringify(s));
        assert.equal(decode(got), s);
      }),
      { numRuns: 2000 },
    );
  });
});
