import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { base64ToFloats, encodeEmbeddings, floatsToBase64, inputCount, type EmbeddingResponse } from './schema.ts';

describe('floatsToBase64 / base64ToFloats', () => {
  it('1.0 is the little-endian float32 bytes 00 00 80 3f', () => {
    assert.equal(floatsToBase64([1]), 'AACAPw==');
    assert.deepEqual([...Buffer.from(floatsToBase64([1]), 'base64')], [0x00, 0x00, 0x80, 0x3f]);
    assert.deepEqual(base64ToFloats('AACAPw=='), [1]);
  });

  it('matches a hand-computed little-endian buffer', () => {
    // 1.0 = 0x3f800000, -2.0 = 0xc0000000, 0.5 = 0x3f000000, 0.15625 = 0x3e200000
    const bytes = Buffer.from([0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0, 0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x20, 0x3e]);
    assert.equal(floatsToBase64([1, -2, 0.5, 0.15625]), bytes.toString('base64'));
    assert.deepEqual(base64ToFloats(bytes.toString('base64')), [1, -2, 0.5, 0.15625]);
  });

  it('round-trips float32-representable values exactly', () => {
    const values = [
      0,
      -0,
      1,
      -1,
      Math.fround(0.1),
      Math.fround(-0.123456789),
      3.4028234663852886e38, // largest float32
      -3.4028234663852886e38,
      1.1754943508222875e-38, // smallest normal float32
      1.401298464324817e-45, // smallest subnormal float32
      Infinity,
      -Infinity,
      NaN,
    ];
    const back = base64ToFloats(floatsToBase64(values));
    assert.equal(back.length, values.length);
    // deepStrictEqual compares with Object.is: -0 stays -0 and NaN stays NaN
    assert.deepEqual(back, values);
  });

  it('round-trips a long vector exactly', () => {
    const v = Array.from({ length: 1536 }, (_, i) => Math.fround(Math.sin(i) / (i + 1)));
    assert.deepEqual(base64ToFloats(floatsToBase64(v)), v);
  });

  it('rounds values that are not float32-representable to the nearest float32', () => {
    const [x] = base64ToFloats(floatsToBase64([0.1]));
    assert.equal(x, Math.fround(0.1));
    assert.notEqual(x, 0.1);
  });

  it('handles the empty vector', () => {
    assert.equal(floatsToBase64([]), '');
    assert.deepEqual(base64ToFloats(''), []);
  });

  it('rejects base64 that is not a whole number of float32 values', () => {
    assert.throws(() => base64ToFloats(Buffer.from([1, 2, 3]).toString('base64')), /whole number of float32/);
    assert.throws(() => base64ToFloats(Buffer.from([1, 2, 3, 4, 5]).toString('base64')), /whole number of float32/);
  });
});

function response(...embeddings: Array<number[] | string>): EmbeddingResponse {
  return {
    object: 'list',
    data: embeddings.map((embedding, index) => ({ object: 'embedding', index, embedding })),
    model: 'm',
    usage: { prompt_tokens: 1, total_tokens: 1 },
  };
}

describe('encodeEmbeddings', () => {
  const a = [1, -2, 0.5];
  const b = [0.15625, 0, -1];
  const aB64 = 'AACAPwAAAMAAAAA/';

  it('converts float → base64 when base64 is asked for', () => {
    assert.equal(floatsToBase64(a), aB64);
    const out = encodeEmbeddings(response(a, b), 'base64');
    assert.deepEqual(
      out.data.map((d) => d.embedding),
      [aB64, floatsToBase64(b)],
    );
  });

  it('converts base64 → float for float and for the default', () => {
    for (const format of ['float', undefined] as const) {
      const out = encodeEmbeddings(response(aB64, floatsToBase64(b)), format);
      assert.deepEqual(
        out.data.map((d) => d.embedding),
        [a, b],
      );
    }
  });

  it('leaves vectors already in the asked format untouched', () => {
    const floats = response(a, b);
    const before = floats.data.map((d) => d.embedding);
    const out = encodeEmbeddings(floats, 'float');
    assert.equal(out, floats);
    out.data.forEach((d, i) => assert.equal(d.embedding, before[i], 'same array, not a copy'));
    assert.deepEqual(out.data[0]?.embedding, [1, -2, 0.5]);

    const strings = encodeEmbeddings(response(aB64), 'base64');
    assert.equal(strings.data[0]?.embedding, aB64);
  });

  it('converts a mixed response to one format', () => {
    assert.deepEqual(
      encodeEmbeddings(response(a, floatsToBase64(b)), 'float').data.map((d) => d.embedding),
      [a, b],
    );
    assert.deepEqual(
      encodeEmbeddings(response(a, floatsToBase64(b)), 'base64').data.map((d) => d.embedding),
      [aB64, floatsToBase64(b)],
    );
  });

  it('keeps index, object and usage', () => {
    const out = encodeEmbeddings(response(a, b), 'base64');
    assert.deepEqual(
      out.data.map((d) => [d.object, d.index]),
      [
        ['embedding', 0],
        ['embedding', 1],
      ],
    );
    assert.deepEqual(out.usage, { prompt_tokens: 1, total_tokens: 1 });
  });
});

describe('inputCount', () => {
  it('counts inputs, a flat token array being one input', () => {
    assert.equal(inputCount('hello world'), 1);
    assert.equal(inputCount(['a', 'b', 'c']), 3);
    assert.equal(inputCount(['only']), 1);
    assert.equal(inputCount([1, 2, 3, 4]), 1);
    assert.equal(inputCount([[1, 2], [3], [4, 5, 6]]), 3);
  });
});
