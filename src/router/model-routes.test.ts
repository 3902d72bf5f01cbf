import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ModelConfig } from '../config/schema.ts';
import { ModelRoutes, targetModel } from './model-routes.ts';

const entry = (model: string): ModelConfig => ({ policy: 'fallback', sticky: false, targets: [{ backend: 'b', model, weight: 1 }] });

describe('model routes', () => {
  const routes = new ModelRoutes({
    chat: entry('exact'),
    '*': entry('catch-all'),
    'claude-*': entry('${0}'),
    'claude-sonnet-*': entry('sonnet-${1}'),
    'openai/*': entry('${1}'),
    '*-mini': entry('mini'),
    'a*b*c': entry('${1}|${2}'),
  });

  test('an exact name wins over every pattern, even the catch-all', () => {
    assert.equal(routes.match('chat')?.key, 'chat');
  });

  test('the most literal characters win; the catch-all comes last', () => {
    assert.equal(routes.match('claude-sonnet-4-5-20250929')?.key, 'claude-sonnet-*');
    assert.equal(routes.match('claude-haiku-4-5')?.key, 'claude-*');
    assert.equal(routes.match('openai/gpt-4o-mini')?.key, 'openai/*');
    assert.equal(routes.match('gpt-4o-mini')?.key, '*-mini');
    assert.equal(routes.match('llama3')?.key, '*');
  });

  test('on equal literal length, the fewest stars, then the order in providers.yaml', () => {
    const r = new ModelRoutes({ 'x*': entry('first'), '*x': entry('second'), 'x**': entry('starry') });
    assert.equal(r.match('xx')?.key, 'x*');
  });

  test('captures: ${0} is the whole name, ${1}… what each * matched', () => {
    const m = routes.match('claude-sonnet-4-5');
    assert.deepEqual(m?.captures, ['claude-sonnet-4-5', '4-5']);
    assert.equal(targetModel('sonnet-${1}', m?.captures ?? []), 'sonnet-4-5');
    assert.equal(targetModel('${0}', m?.captures ?? []), 'claude-sonnet-4-5');
    const abc = routes.match('a1b2c');
    assert.equal(abc?.key, 'a*b*c');
    assert.equal(targetModel('${1}|${2}', abc?.captures ?? []), '1|2');
  });

  test('special characters in a key are literal', () => {
    const r = new ModelRoutes({ 'a.b+(c)*': entry('x') });
    assert.equal(r.match('a.b+(c)-1')?.key, 'a.b+(c)*');
    assert.equal(r.match('aXb+(c)-1'), undefined);
  });

  test('no match: undefined; concrete names list no pattern', () => {
    const r = new ModelRoutes({ chat: entry('x'), 'claude-*': entry('${0}') });
    assert.equal(r.match('gpt-4o'), undefined);
    assert.deepEqual(r.concrete(), ['chat']);
    assert.equal(r.keyOf('claude-x'), 'claude-*');
    assert.equal(r.keyOf('chat'), 'chat');
  });
});
