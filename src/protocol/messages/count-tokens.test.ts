import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { countInputTokens, countTokensResponse, promptOf, PER_IMAGE, PER_MESSAGE, PER_PDF, TOOLS_SYSTEM_PROMPT } from './count-tokens.ts';
import { parseCountTokensRequest } from './schema.ts';

/** One token per whitespace-separated word: easy to count by hand. */
const words = (t: string): number => t.split(/\s+/).filter(Boolean).length;

describe('count_tokens estimate', () => {
  it('counts system, message text, tool_use input, tool results and documents, plus fixed allowances', () => {
    const req = parseCountTokensRequest({
      model: 'm',
      system: [{ type: 'text', text: 'be brief' }],
      messages: [
        { role: 'system', content: 'extra rule' },
        { role: 'user', content: [
          { type: 'text', text: 'one two three' },
          { type: 'image', source: { type: 'url', url: 'https://x/y.png' } },
          { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBE' } },
          { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'doc text' }, title: 'T' },
        ] },
        { role: 'assistant', content: [
          { type: 'thinking', thinking: 'not counted at all', signature: 's' },
          { type: 'tool_use', id: 't', name: 'f', input: { a: 1 } },
        ] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'text', text: 'r1 r2' }] }] },
      ],
    });
    const p = promptOf(req);
    assert.equal(p.fixed, 4 * PER_MESSAGE + PER_IMAGE + PER_PDF);
    assert.deepEqual(p.texts, ['be brief', 'system', 'extra rule', 'user', 'one two three', 'T', 'doc text', 'assistant', 'f', '{"a":1}', 'user', 'r1 r2']);
    const textTokens = 2 + 1 + 2 + 1 + 3 + 1 + 2 + 1 + 1 + 1 + 1 + 2;
    assert.equal(countInputTokens(req, words), p.fixed + textTokens);
  });

  it('adds the tool-use system prompt and each tool definition', () => {
    const tool = { name: 'get_weather', description: 'Weather now', input_schema: { type: 'object' } };
    const req = parseCountTokensRequest({ model: 'm', messages: [{ role: 'user', content: 'hi' }], tools: [tool] });
    const p = promptOf(req);
    assert.equal(p.fixed, PER_MESSAGE + TOOLS_SYSTEM_PROMPT);
    assert.equal(p.texts.at(-1), JSON.stringify(tool));
    const without = countInputTokens(parseCountTokensRequest({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }), words);
    assert.ok(countInputTokens(req, words) > without + TOOLS_SYSTEM_PROMPT);
  });

  it('answers in count_tokens shape', () => {
    assert.deepEqual(countTokensResponse(41.6), { input_tokens: 42 });
  });
});
