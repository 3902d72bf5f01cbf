import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { costUsd, formatUsd } from './cost.ts';

describe('costUsd', () => {
  it('prices prompt and completion tokens per million', () => {
    assert.equal(costUsd({ prompt_tokens: 1000, completion_tokens: 500 }, { input: 0.15, output: 0.6 }), 0.00045);
  });
  it('is unknown without a price or without usage — never silently 0', () => {
    assert.equal(costUsd({ prompt_tokens: 10, completion_tokens: 10 }, undefined), undefined);
    assert.equal(costUsd(undefined, { input: 1, output: 1 }), undefined);
  });
  it('a zero price (local model) is a known zero', () => {
    assert.equal(costUsd({ prompt_tokens: 10, completion_tokens: 10 }, { input: 0, output: 0 }), 0);
  });
  it('formats without exponents', () => {
    assert.equal(formatUsd(0.00045), '0.00045');
    assert.equal(formatUsd(0), '0.0');
    assert.equal(formatUsd(12.5), '12.5');
    assert.equal(formatUsd(1e-9), '0.0');
  });
});
