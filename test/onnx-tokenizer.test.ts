/**
 * The onnx backend's tokenizer: a Hugging Face tokenizer.json (a small BERT WordPiece one,
 * generated here) through @huggingface/tokenizers, with truncation at max_length.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { TextTokenizer } from '../src/backends/onnx/tokenizer.ts';
import { writeTokenizer } from './support/wordpiece.ts';

describe('TextTokenizer', () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-tok-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'tokenizer.json');
  writeTokenizer(path);

  it('encodes WordPiece with [CLS] … [SEP], lowercases, splits sub-words, and truncates', async () => {
    const t = await TextTokenizer.load(path);
    assert.equal(t.padId, 0);
    assert.equal(t.vocabSize, 40);
    const e = t.encode('The cats JUMPED!', 512);
    // [CLS] the cat ##s jump ##ed ! [SEP]
    assert.deepEqual(e.ids, [2, 5, 30, 10, 9, 11, 28, 3]);
    assert.deepEqual(e.typeIds, [0, 0, 0, 0, 0, 0, 0, 0]);
    assert.equal(e.truncated, false);
    const cut = t.encode('The cats JUMPED!', 4);
    assert.deepEqual(cut.ids, [2, 5, 30, 3]);
    assert.equal(cut.truncated, true);
    assert.equal(cut.fullLength, 8);
  });

  it('reports a missing or malformed tokenizer.json by path', async () => {
    await assert.rejects(TextTokenizer.load(join(dir, 'nope.json')), /tokenizer_path .*nope\.json: file not found/);
    writeFileSync(join(dir, 'bad.json'), '{"version": "1.0"}');
    await assert.rejects(TextTokenizer.load(join(dir, 'bad.json')), /not a Hugging Face tokenizer\.json/);
    writeFileSync(join(dir, 'junk.json'), '{"version": ');
    await assert.rejects(TextTokenizer.load(join(dir, 'junk.json')), /junk\.json: not valid JSON/);
  });
});
