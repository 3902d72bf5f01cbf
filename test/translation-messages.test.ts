/**
 * Generated content through the real HTTP path, Messages ingress: any Unicode text, tool calls
 * and usage from a scripted upstream, its body cut into writes at any byte, come back exact in the
 * deltas, the message and the Anthropic SDK's `finalMessage()` (test/support/translation-harness.ts;
 * the checks: translation-check.ts).
 *
 * Pairs covered (each JSON and stream): Messages × Anthropic Messages (passed through natively),
 * Messages × OpenAI chat, × llama-server (translated through chat).
 * Not supported, so not covered: Messages × native Responses — a `responses: true` backend serves
 * Messages through its chat route (the OpenAI chat pair above).
 */
import { describe } from 'node:test';
import { plainScenario } from './support/translation-arbitraries.ts';
import { nastyCase, pairProperty, regression, translationHarness } from './support/translation-harness.ts';

const RUNS = 30;
const harness = translationHarness();

describe('messages ingress', () => {
  for (const stream of [false, true]) {
    pairProperty(harness, 'messages', 'anthropic', stream, RUNS);
    pairProperty(harness, 'messages', 'openai', stream, RUNS);
    pairProperty(harness, 'messages', 'llama', stream, RUNS);
  }
});

describe('messages: every nasty fragment at once', () => {
  for (const backend of ['anthropic', 'openai', 'llama'] as const) nastyCase(harness, 'messages', backend);
});

// A shrunk counterexample: a translated stream's message_start carries the gateway's estimate of
// the prompt's tokens (the upstream reports its count only at the end, in message_delta), never 0.
describe('messages: message_start input tokens (regressions)', () => {
  for (const backend of ['openai', 'llama'] as const) {
    regression(harness, 'message_start counts a one-character prompt (shrunk)', 'messages', backend, true, plainScenario({}, { user: '!' }));
  }
});
