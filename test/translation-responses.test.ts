/**
 * Generated content through the real HTTP path, Responses ingress: any Unicode text, tool calls
 * and usage from a scripted upstream, its body cut into writes at any byte, come back exact in
 * every place a client reads them — the deltas, `output_text.done`, `output_item.done`,
 * `response.completed`, the stored response (GET /v1/responses/{id}) and the openai SDK's
 * `finalResponse()` (test/support/translation-harness.ts; the checks: translation-check.ts).
 *
 * Pairs covered (each JSON and stream): Responses × native Responses (passed through),
 * Responses × OpenAI chat, × Anthropic Messages, × llama-server (translated through chat).
 */
import { describe } from 'node:test';
import { plainScenario } from './support/translation-arbitraries.ts';
import { nastyCase, pairProperty, regression, translationHarness } from './support/translation-harness.ts';

const RUNS = 30;
const harness = translationHarness();

describe('responses ingress', () => {
  for (const stream of [false, true]) {
    pairProperty(harness, 'responses', 'responses', stream, RUNS);
    pairProperty(harness, 'responses', 'openai', stream, RUNS);
    pairProperty(harness, 'responses', 'anthropic', stream, RUNS);
    pairProperty(harness, 'responses', 'llama', stream, RUNS);
  }
});

describe('responses: every nasty fragment at once', () => {
  for (const backend of ['responses', 'openai', 'anthropic', 'llama'] as const) nastyCase(harness, 'responses', backend);
});

// Shrunk counterexamples and the cases: a translated stream takes a message's first token
// from the chunk's JSON text, which must be decoded as a JSON string (not as URL escapes, which
// turn `%41` into `A` and leave `\"`, `\\`, `\n`, `\u0000` and `\u00a0` escaped) in the deltas,
// output_text.done, response.completed and the stored response.
describe('responses: first-token decoding (regressions)', () => {
  for (const backend of ['openai', 'llama'] as const) {
    regression(harness, 'a control character in the first token (shrunk)', 'responses', backend, true, plainScenario({ text: ['\u0000'] }, { user: '!' }));
    regression(harness, 'a JSON \\u escape in the first token (shrunk)', 'responses', backend, true, plainScenario({ text: ['\u00a0'], framing: { escaping: 'ascii' } }, { user: '!' }));
    regression(harness, 'a %XX sequence in the first token', 'responses', backend, true, plainScenario({ text: ['50%41 off', ' today'] }));
    regression(harness, 'a quote, backslash and newline in the first token', 'responses', backend, true, plainScenario({ text: ['say "hi" \\ \n', 'and "bye"'] }, {}, true));
  }
});
