/**
 * Generated content through the real HTTP path, Chat Completions and legacy Completions ingress:
 * any Unicode text, tool calls and usage from a scripted upstream, its body cut into writes at any
 * byte, come back exact (test/support/translation-harness.ts; the checks: translation-check.ts).
 *
 * Pairs covered (each JSON and stream):
 *   chat × OpenAI chat, chat × Anthropic Messages (translated), chat × llama-server;
 *   completions × OpenAI completions, completions × llama-server.
 * Not supported, so not covered:
 *   chat × native Responses — a `responses: true` backend serves chat on its chat route (the
 *   OpenAI chat pair above);
 *   completions × Anthropic — Anthropic has no legacy completions (400 model_not_supported);
 *   completions × native Responses — served on the backend's /completions route (OpenAI above).
 */
import { describe } from 'node:test';
import { nastyCase, pairProperty, translationHarness } from './support/translation-harness.ts';

const RUNS = 30;
const harness = translationHarness();

describe('chat ingress', () => {
  for (const stream of [false, true]) {
    pairProperty(harness, 'chat', 'openai', stream, RUNS);
    pairProperty(harness, 'chat', 'anthropic', stream, RUNS);
    pairProperty(harness, 'chat', 'llama', stream, RUNS);
  }
});

describe('completions ingress', () => {
  for (const stream of [false, true]) {
    pairProperty(harness, 'completions', 'openai', stream, RUNS);
    pairProperty(harness, 'completions', 'llama', stream, RUNS);
  }
});

describe('chat and completions: every nasty fragment at once', () => {
  nastyCase(harness, 'chat', 'openai');
  nastyCase(harness, 'chat', 'anthropic');
  nastyCase(harness, 'chat', 'llama');
  nastyCase(harness, 'completions', 'openai');
  nastyCase(harness, 'completions', 'llama');
});
