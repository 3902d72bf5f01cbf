/**
 * `switchyard inspect MODEL.onnx`, run as users run it (the `bin` script, a child process), on
 * models generated here; and the ONNX header reader behind it.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readModelHeader } from '../src/backends/onnx/header.ts';
import { randomTable, writeTinyModel } from './support/onnx-model.ts';

const bin = join(import.meta.dirname, '..', 'scripts', 'switchyard.mjs');

function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('switchyard inspect', () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-inspect-'));
  const good = join(dir, 'minilm', 'v3', 'model.onnx');
  const tokens = join(dir, 'tokens.onnx');
  const bad = join(dir, 'renamed.onnx');
  before(() => {
    writeTinyModel(good, { table: randomTable(12, 6), metadata: { source: 'unit-test', pooling: 'mean' }, producer: 'pytorch' });
    writeTinyModel(tokens, { table: randomTable(12, 6), output: 'token', typeTable: randomTable(2, 6) });
    writeTinyModel(bad, { table: randomTable(12, 6), names: { ids: 'ids', mask: 'mask' } });
    writeFileSync(join(dir, 'not-a-model.onnx'), '{"this is": "json"}');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('reads ir_version, opsets, producer and metadata_props from the file', async () => {
    const h = await readModelHeader(good);
    assert.equal(h.irVersion, 8);
    assert.deepEqual(h.opsets, [{ domain: '', version: 13 }]);
    assert.equal(h.producerName, 'pytorch');
    assert.equal(h.modelVersion, 1);
    assert.deepEqual(h.metadata, [
      { key: 'source', value: 'unit-test' },
      { key: 'pooling', value: 'mean' },
    ]);
    await assert.rejects(readModelHeader(join(dir, 'not-a-model.onnx')), /not an ONNX model/);
  });

  test('prints inputs, outputs, opset, producer and metadata, and says the model fits (exit 0)', async () => {
    const r = await run(['inspect', good]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /ir_version: 8 {4}opset: ai\.onnx 13/);
    assert.match(r.stdout, /producer: pytorch 1/);
    assert.match(r.stdout, /inputs:\n {4}input_ids +int64 +\[batch, sequence\]\n {4}attention_mask +int64 +\[batch, sequence\]/);
    assert.match(r.stdout, /outputs:\n {4}sentence_embedding +float32 +\[batch, 6\]/);
    assert.match(r.stdout, /metadata_props:\n {4}source: unit-test\n {4}pooling: mean/);
    assert.match(r.stdout, /onnx backend: fits — pooled output "sentence_embedding", 6 dimensions/);
  });

  test('--json gives the same as data', async () => {
    const r = await run(['inspect', tokens, '--json']);
    assert.equal(r.code, 0, r.stderr);
    const j = JSON.parse(r.stdout) as Record<string, unknown>;
    assert.deepEqual(j.inputs, [
      { name: 'input_ids', type: 'int64', shape: ['batch', 'sequence'] },
      { name: 'attention_mask', type: 'int64', shape: ['batch', 'sequence'] },
      { name: 'token_type_ids', type: 'int64', shape: ['batch', 'sequence'] },
    ]);
    assert.deepEqual(j.outputs, [{ name: 'last_hidden_state', type: 'float32', shape: ['batch', 'sequence', 6] }]);
    assert.deepEqual(j.onnx_backend, { fits: true, output: 'last_hidden_state', output_level: 'token', dimensions: 6, token_type_ids: true });
  });

  test('a model with other tensor names: listed, with the one error, exit 2', async () => {
    const r = await run(['inspect', bad]);
    assert.equal(r.code, 2);
    assert.match(r.stdout, /inputs:\n {4}ids +int64/);
    assert.match(r.stdout, /onnx backend: the model does not fit the onnx backend: missing inputs "input_ids", "attention_mask"; unexpected inputs "ids", "mask"/);
  });

  test('a missing file, a file that is not ONNX, and bad usage exit 1 with a message', async () => {
    const missing = await run(['inspect', join(dir, 'nope.onnx')]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /nope\.onnx: file not found/);
    const junk = await run(['inspect', join(dir, 'not-a-model.onnx')]);
    assert.equal(junk.code, 1);
    assert.match(junk.stderr, /not a loadable ONNX model: not an ONNX model/);
    const usage = await run(['inspect']);
    assert.equal(usage.code, 1);
    assert.match(usage.stderr, /usage: switchyard inspect MODEL\.onnx/);
    const unknown = await run(['frobnicate']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /unknown command "frobnicate"/);
  });
});
