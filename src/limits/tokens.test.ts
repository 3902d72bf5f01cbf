import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { ChatRequest } from '../protocol/chat/schema.ts';
import { chatPrompt, countPrompt, embeddingPrompt, outputReserve } from './estimate.ts';
import { encodingFor, TokenCounter } from './tokens.ts';

describe('token counting (real tokenizer, in a worker)', () => {
  const tc = new TokenCounter();
  after(() => tc.close());

  it('counts like tiktoken, per encoding', async () => {
    assert.equal(await tc.count('cl100k_base', ['hello world']), 2);
    assert.equal(await tc.count('o200k_base', ['hello world']), 2);
    // the same text tokenizes differently in the two vocabularies
    const text = 'Switchyard routes requests: ünïcödé, emoji 🚂, code `x => x * 2`.';
    const a = await tc.count('cl100k_base', [text]);
    const b = await tc.count('o200k_base', [text]);
    assert.ok(a > 10 && b > 10);
    // special-token text is counted, not refused
    assert.ok((await tc.count('cl100k_base', ['<|endoftext|>'])) >= 1);
    // memoised counts are the same counts
    assert.equal(await tc.count('cl100k_base', [text]), a);
    assert.equal(await tc.count('cl100k_base', [text, text]), 2 * a);
    assert.equal(await tc.count('cl100k_base', []), 0);
  });

  it('remembers counts on the calling thread: known texts are counted without the worker, within bounds', async () => {
    const small = new TokenCounter(2000);
    try {
      const texts = Array.from({ length: 30 }, (_, i) => `text number ${i}: ${'ab '.repeat(2 * i)}`);
      const each = await Promise.all(texts.map((t) => tc.count('cl100k_base', [t])));
      // counted through the bounded memo (most entries evicted on the way), the counts stay exact
      for (let round = 0; round < 2; round++) {
        for (let i = 0; i < texts.length; i++) assert.equal(await small.count('cl100k_base', [texts[i] ?? '']), each[i]);
      }
      const total = each.reduce((a, b) => a + b, 0);
      assert.equal(await small.count('cl100k_base', texts), total);
      // the last text is remembered: with the worker gone it is still counted, at once
      await small.close();
      const last = texts.at(-1) ?? '';
      let settled = false;
      const p = small.count('cl100k_base', [last]).then((n) => {
        settled = true;
        return n;
      });
      await Promise.resolve();
      assert.ok(settled, 'a remembered text waits for no worker');
      assert.equal(await p, each.at(-1));
    } finally {
      await small.close();
    }
  });

  it('picks o200k_base for the 4o / 4.1 / 5 / o-series families, cl100k_base otherwise', () => {
    for (const m of ['gpt-4o-mini', 'gpt-4o', 'gpt-4.1-nano', 'gpt-5', 'o3-mini', 'o1', 'openai/gpt-oss-20b', 'chatgpt-4o-latest']) assert.equal(encodingFor(m), 'o200k_base', m);
    for (const m of ['gpt-4', 'gpt-3.5-turbo', 'claude-3-5-haiku-latest', 'qwen2.5-7b-instruct', 'echo', 'o10-thing']) assert.equal(encodingFor(m), 'cl100k_base', m);
  });

  it('a chat prompt: message texts, names, tool calls, tools and framing', async () => {
    const req = {
      model: 'm',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: [{ type: 'text', text: 'hello world' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,xx' } }] },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] },
      ],
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
    } as unknown as ChatRequest;
    const p = chatPrompt(req);
    assert.equal(p.fixed, 3 + 3 * 4 + 85);
    assert.deepEqual(p.texts.slice(0, 4), ['You are terse.', 'hello world', 'f', '{"a":1}']);
    const n = await countPrompt(tc, 'cl100k_base', p);
    assert.ok(n > p.fixed + 8);
    assert.deepEqual(embeddingPrompt({ model: 'e', input: [[1, 2, 3], [4]] } as never), { texts: [], fixed: 4 });
    assert.equal(outputReserve(undefined, 2, 100), 200);
    assert.equal(outputReserve(7, undefined, 100), 7);
  });
});
