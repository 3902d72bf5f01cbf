/**
 * sniffEmbeddings: which upstream answers are forwarded as their bytes, and that everything else
 * (anything the full path would convert, sort, reject or normalise) is left to the full path.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { floatsToBase64, RawEmbeddingResponse } from '../../protocol/embeddings/schema.ts';
import { sniffEmbeddings } from './embeddings-passthrough.ts';

const V = [
  [0.0125, -0.5, 1e-7, 3],
  [-0.25, 0.75, 2.5e3, 0],
  [1, 2, 3, 4],
];

function answer(vectors: unknown[], extra: Record<string, unknown> = {}, indent?: number): Buffer<ArrayBuffer> {
  const body = {
    object: 'list',
    data: vectors.map((embedding, index) => ({ object: 'embedding', index, embedding })),
    model: 'text-embedding-3-small',
    usage: { prompt_tokens: 9, total_tokens: 9 },
    ...extra,
  };
  return Buffer.from(JSON.stringify(body, null, indent));
}

describe('sniffEmbeddings', () => {
  test('a well-formed float answer is forwarded byte for byte, with its usage and model read', () => {
    for (const indent of [undefined, 2]) {
      const bytes = answer(V, {}, indent);
      const r = sniffEmbeddings(bytes, 'float', 3);
      assert.ok(r instanceof RawEmbeddingResponse, `indent ${indent}`);
      assert.equal(r.bytes, bytes);
      assert.deepEqual(r.usage, { prompt_tokens: 9, total_tokens: 9 });
      assert.equal(r.model, 'text-embedding-3-small');
    }
  });

  test('a well-formed base64 answer is forwarded', () => {
    const bytes = answer(V.map((v) => floatsToBase64(v)));
    const r = sniffEmbeddings(bytes, 'base64', 3);
    assert.ok(r instanceof RawEmbeddingResponse);
    assert.equal(r.bytes, bytes);
  });

  test('keys in another order and vendor extras are fine', () => {
    const bytes = Buffer.from(
      `{"usage":{"prompt_tokens":2,"total_tokens":2},"data":[{"embedding":[1.5,2],"index":0,"object":"embedding","extra":{"a":[1]}}],"object":"list","model":"m","id":"x"}`,
    );
    assert.ok(sniffEmbeddings(bytes, 'float', 1) instanceof RawEmbeddingResponse);
  });

  const fullPath: Array<[string, Buffer<ArrayBuffer>, 'float' | 'base64', number]> = [
    ['fewer vectors than inputs', answer(V.slice(0, 2)), 'float', 3],
    ['more vectors than inputs', answer(V), 'float', 2],
    ['base64 when float was asked (upstream ignored the format)', answer(V.map((v) => floatsToBase64(v))), 'float', 3],
    ['floats when base64 was asked', answer(V), 'base64', 3],
    ['items out of index order', Buffer.from(answer(V).toString().replace('"index":0', '"index":9')), 'float', 3],
    ['no usage', answer(V, { usage: undefined }), 'float', 3],
    ['usage that is not a count', answer(V, { usage: { prompt_tokens: '9', total_tokens: 9 } }), 'float', 3],
    ['object is not "list"', answer(V, { object: 'embeddings' }), 'float', 3],
    ['nested arrays (llama-server with pooling none)', answer([[[1, 2]], [[3]], [[4]]]), 'float', 3],
    ['a string inside a float array', answer([[1, '2'], [3], [4]]), 'float', 3],
    ['an object inside a float array', answer([[1, { a: 1 }], [3], [4]]), 'float', 3],
    ['NaN in the first vector', Buffer.from(answer(V).toString().replace('0.0125', 'NaN')), 'float', 3],
    ['garbage in the first vector', Buffer.from(answer(V).toString().replace('0.0125', '0..1')), 'float', 3],
    ['base64 vectors of different lengths', answer([floatsToBase64([1, 2]), floatsToBase64([1]), floatsToBase64([1, 2])]), 'base64', 3],
    ['base64 with an escape', Buffer.from(answer(['AAAA', 'AAAA', 'AAAA']).toString().replace('"AAAA"', '"AA\\/A"')), 'base64', 3],
    // as long as the others in the JSON text (14 letters and an escaped backslash): only the escape check refuses it
    ['base64 with an escape in the last vector', answer([floatsToBase64([1, 2, 3]), floatsToBase64([1, 2, 3]), `${'A'.repeat(14)}\\`]), 'base64', 3],
    ['a float array holding an array in the last vector', answer([[1, 2], [3], [4, [5]]]), 'float', 3],
    ['not base64', answer(['AA*A', 'AA*A', 'AA*A']), 'base64', 3],
    ['base64 that is not whole float32 values', answer(['AAA=', 'AAA=', 'AAA=']), 'base64', 3],
    ['truncated JSON', answer(V).subarray(0, 120) as Buffer<ArrayBuffer>, 'float', 3],
    ['trailing garbage', Buffer.concat([answer(V), Buffer.from('xx')]), 'float', 3],
    ['an array at the top', Buffer.from(`[${answer(V).toString()}]`), 'float', 3],
    ['an embedding that is a number', Buffer.from(answer(V).toString().replace('[1,2,3,4]', '7')), 'float', 3],
    ['empty', Buffer.alloc(0), 'float', 1],
  ];
  for (const [name, bytes, format, inputs] of fullPath) {
    test(`left to the full path: ${name}`, () => {
      assert.equal(sniffEmbeddings(bytes, format, inputs), undefined);
    });
  }

  test('a backslash outside the vectors (in the model name) does not count against them', () => {
    const v = floatsToBase64([1, 2, 3]);
    const r = sniffEmbeddings(answer([v, v, v], { model: 'a\\b' }), 'base64', 3);
    assert.ok(r instanceof RawEmbeddingResponse);
    assert.equal(r.model, 'a\\b');
  });

  test('"embedding" inside a string value does not confuse the cutting', () => {
    const bytes = answer(V, { model: 'm "embedding": [1] x' });
    const r = sniffEmbeddings(bytes, 'float', 3);
    // the escaped quotes keep it from matching as a key: forwarded, model read intact
    assert.ok(r instanceof RawEmbeddingResponse);
    assert.equal(r.model, 'm "embedding": [1] x');
  });
});
