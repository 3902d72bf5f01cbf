/**
 * Chunk texts kept for forwarding: what is forwarded is always the JSON of the chunk as it is now
 * (checked by parsing it back), whether the kept text could be edited or had to be dropped.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { droppedUsageNull, jsonText, keepText } from './event-text.ts';

function parsed(text: string): Record<string, unknown> {
  return keepText(JSON.parse(text) as Record<string, unknown>, text);
}

/** Removes usage the way pipeline-streams does, and returns what would be forwarded. */
function withoutUsage(text: string): string {
  const chunk = parsed(text);
  delete chunk.usage;
  droppedUsageNull(chunk);
  const out = jsonText(chunk);
  assert.deepEqual(JSON.parse(out), chunk, `forwarded ${out}`);
  return out;
}

describe('event texts', () => {
  test('an unchanged chunk is forwarded as the text it came in (spacing and number spelling kept)', () => {
    const text = '{"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}],"x":1.0, "y": 1E2}';
    assert.equal(jsonText(parsed(text)), text);
  });

  test('objects without a text, and texts with line breaks, are printed', () => {
    assert.equal(jsonText({ a: 1 }), '{"a":1}');
    const multi = '{"a":\n1}';
    assert.equal(jsonText(parsed(multi)), '{"a":1}');
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

  test('texts are found by identity only; a chunk asked for after many newer ones is printed again, correctly', () => {
    const text = '{"a": 1}';
    const kept = parsed(text);
    const twin = JSON.parse(text) as Record<string, unknown>;
    assert.equal(jsonText(twin), '{"a":1}', 'an equal object without a text is printed');
    assert.equal(jsonText(kept), text);
    for (let i = 0; i < 2000; i++) keepText({ i }, `{"i": ${i}}`);
    assert.equal(jsonText(kept), '{"a":1}', 'pushed out of the ring: printed, still the same JSON');
  });
});

