import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { l2Normalize, ModelMismatchError, padBatch, planModel, poolTokens, splitRows, type ValueInfo } from './model.ts';
import { truncateEncoding } from './tokenizer.ts';

const bert: ValueInfo[] = [
  { name: 'input_ids', type: 'int64', shape: ['batch', 'sequence'] },
  { name: 'attention_mask', type: 'int64', shape: ['batch', 'sequence'] },
  { name: 'token_type_ids', type: 'int64', shape: ['batch', 'sequence'] },
];
const pooled: ValueInfo = { name: 'sentence_embedding', type: 'float32', shape: ['batch', 384] };
const tokens: ValueInfo = { name: 'last_hidden_state', type: 'float32', shape: ['batch', 'sequence', 384] };

function mismatch(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ModelMismatchError, `expected ModelMismatchError, got ${String(err)}`);
    return err.message;
  }
  assert.fail('expected a ModelMismatchError');
}

describe('planModel', () => {
  it('takes BERT-style inputs, with token_type_ids when the model has it', () => {
    const p = planModel(bert, [pooled]);
    assert.deepEqual(p.ids, { name: 'input_ids', type: 'int64' });
    assert.deepEqual(p.mask, { name: 'attention_mask', type: 'int64' });
    assert.deepEqual(p.types, { name: 'token_type_ids', type: 'int64' });
    assert.deepEqual(p.output, { name: 'sentence_embedding', level: 'pooled', dim: 384 });
    assert.equal(planModel(bert.slice(0, 2), [pooled]).types, undefined);
  });

  it('accepts int32 inputs', () => {
    const p = planModel(bert.map((v) => ({ ...v, type: 'int32' })), [pooled]);
    assert.equal(p.ids.type, 'int32');
  });

  it('pools a token-level output, prefers a pooled one, and honours output_name', () => {
    assert.deepEqual(planModel(bert, [tokens]).output, { name: 'last_hidden_state', level: 'token', dim: 384 });
    assert.equal(planModel(bert, [tokens, pooled]).output.name, 'sentence_embedding');
    assert.equal(planModel(bert, [tokens, pooled], { outputName: 'last_hidden_state' }).output.level, 'token');
    // an only output with another name is used, by its rank
    assert.deepEqual(planModel(bert, [{ name: 'out', type: 'float32', shape: ['b', 'dyn'] }]).output, { name: 'out', level: 'pooled', dim: undefined });
  });

  it('names what the model has and what was expected when the input names do not match', () => {
    const msg = mismatch(() =>
      planModel(
        [
          { name: 'ids', type: 'int64', shape: ['batch', 'seq'] },
          { name: 'mask', type: 'int64', shape: ['batch', 'seq'] },
        ],
        [pooled],
      ),
    );
    assert.match(msg, /missing inputs "input_ids", "attention_mask"/);
    assert.match(msg, /unexpected inputs "ids", "mask"/);
    assert.match(msg, /It has inputs ids \(int64 \[batch, seq\]\), mask \(int64 \[batch, seq\]\) and outputs sentence_embedding \(float32 \[batch, 384\]\)/);
    assert.match(msg, /expected inputs input_ids and attention_mask/);
    assert.equal(msg.split('\n').length, 1, 'one line');
  });

  it('reports every problem in the one error', () => {
    const msg = mismatch(() => planModel([{ name: 'input_ids', type: 'float32', shape: ['b', 's'] }], [{ name: 'logits', type: 'int64', shape: ['b', 2] }]));
    assert.match(msg, /missing input "attention_mask"/);
    assert.match(msg, /input "input_ids" is float32, expected int64 or int32/);
    assert.match(msg, /output "logits" is int64, expected float32/);
  });

  it('rejects outputs it cannot choose between or read', () => {
    assert.match(mismatch(() => planModel(bert, [{ ...pooled, name: 'a' }, { ...pooled, name: 'b' }])), /more than one output to choose from/);
    assert.match(mismatch(() => planModel(bert, [{ ...tokens, shape: [1, 2, 3, 4] }])), /has 4 dimensions/);
    assert.match(mismatch(() => planModel(bert, [pooled], { outputName: 'nope' })), /output_name "nope" is not an output of the model/);
  });
});

describe('padBatch', () => {
  it('pads to the longest sequence of the batch, with mask 0 and the pad id', () => {
    const p = padBatch([{ ids: [2, 7, 3] }, { ids: [2, 3], typeIds: [0, 1] }], 9);
    assert.equal(p.batch, 2);
    assert.equal(p.seqLen, 3);
    assert.deepEqual([...p.ids], [2, 7, 3, 2, 3, 9]);
    assert.deepEqual([...p.mask], [1, 1, 1, 1, 1, 0]);
    assert.deepEqual([...p.types], [0, 0, 0, 0, 1, 0]);
  });
});

describe('pooling and normalisation', () => {
  // batch 2, seq 3, dim 2
  const data = [1, 2, 3, 4, 100, 100, /* row 2 */ 5, 6, 7, 8, 9, 10];
  const mask = [1, 1, 0, 1, 1, 1];

  it('mean pooling averages only the positions the mask keeps', () => {
    const [a, b] = poolTokens(data, 2, 3, 2, mask, 'mean');
    assert.deepEqual([...(a ?? [])], [2, 3]);
    assert.deepEqual([...(b ?? [])], [7, 8]);
  });

  it('cls pooling takes the first position', () => {
    const [a, b] = poolTokens(data, 2, 3, 2, mask, 'cls');
    assert.deepEqual([...(a ?? [])], [1, 2]);
    assert.deepEqual([...(b ?? [])], [5, 6]);
  });

  it('splitRows cuts [batch, dim] into rows; l2Normalize makes unit vectors and leaves zero alone', () => {
    const rows = splitRows([3, 4, 0, 0], 2, 2);
    assert.deepEqual(rows.map((r) => [...l2Normalize(r)]), [
      [0.6000000238418579, 0.800000011920929],
      [0, 0],
    ]);
  });
});

describe('truncateEncoding', () => {
  it('keeps the special tokens and cuts the text', () => {
    const full = { ids: [2, 10, 11, 12, 13, 3], typeIds: [0, 0, 0, 0, 0, 0] };
    assert.deepEqual(truncateEncoding(full, [10, 11, 12, 13], 4).ids, [2, 10, 11, 3]);
    assert.deepEqual(truncateEncoding(full, [10, 11, 12, 13], 6).ids, full.ids);
    assert.deepEqual(truncateEncoding(full, [10, 11, 12, 13], 1).ids, [2], 'never longer than max_length');
    assert.deepEqual(truncateEncoding(full, [99], 3).ids, [2, 10, 11], 'text not found: plain cut');
  });
});
