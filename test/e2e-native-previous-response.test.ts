/**
 * End to end through the openai SDK: a Responses answer to a request with `previous_response_id`
 * echoes that id — in the JSON answer, in `response.created` / `response.in_progress` /
 * `response.completed` of a stream, and in the stored response (`responses.retrieve`) — whether
 * the target speaks the Responses API natively (`type: openai` with `responses: true`, against the
 * strict fake Responses upstream) or is translated to chat. Texts carry quotes, backslashes,
 * newlines, `%41`, non-ASCII and an emoji, and come back exact.
 */
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import type { Response as OpenAIResponse, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { startFakeResponses, type FakeResponsesUpstream } from './support/fake-responses-upstream.ts';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';

const KEY = 'sk-gw-previous-response-1';
const FIRST_PROMPT = 'Remember: "50%41" \\ caf\u00e9\nand \u{1F600}';
const FIRST_ANSWER = 'Noted: "50%41" \\ back\\slash\nna\u00efve \u2615 \u{1F600}';
const SECOND_PROMPT = 'And then? "%E2%82%AC" \\n \u{1F680}';
const SECOND_ANSWER = 'Then: "quoted" \\ %41\n\u2014 caf\u00e9 \u{1F680}';

/** The output_text of a Response's message items, joined (as the SDK's `output_text`). */
function outputText(r: OpenAIResponse): string {
  let text = '';
  for (const item of r.output) {
    if (item.type !== 'message') continue;
    for (const c of item.content) if (c.type === 'output_text') text += c.text;
  }
  return text;
}

/** The Response each lifecycle event of a stream carries, by event type. */
function lifecycle(events: ResponseStreamEvent[]): Map<string, OpenAIResponse> {
  const out = new Map<string, OpenAIResponse>();
  for (const e of events) {
    if (e.type === 'response.created' || e.type === 'response.in_progress' || e.type === 'response.completed') out.set(e.type, e.response);
  }
  return out;
}

describe('e2e: previous_response_id is echoed in every answer (issue 33.3)', () => {
  let native: FakeResponsesUpstream;
  let chat: FakeUpstream;
  let gw: TestGateway;
  let client: OpenAI;

  before(async () => {
    native = await startFakeResponses({ apiKey: 'sk-up-native' });
    chat = await startFakeOpenAI({ apiKey: 'sk-up-chat' });
    gw = await startGateway(`
routing: { retry: { max_retries: 0 } }
backends:
  native: { type: openai, base_url: "${native.url}", api_key: sk-up-native, responses: true }
  chat: { type: openai, base_url: "${chat.url}", api_key: sk-up-chat }
models:
  native-test: { targets: [ { backend: native, model: gpt-up } ] }
  translated-test: { targets: [ { backend: chat, model: chat-up } ] }
keys:
  - { name: team-a, key: "${KEY}" }
`);
    client = new OpenAI({ baseURL: gw.baseURL, apiKey: KEY, maxRetries: 0 });
  });
  beforeEach(() => {
    native.reset();
    chat.reset();
  });
  after(async () => {
    await gw?.close();
    await native?.close();
    await chat?.close();
  });

  /** Queues the two answers on the model's upstream. */
  function answers(model: string): void {
    if (model === 'native-test') native.enqueue({ kind: 'reply', text: FIRST_ANSWER }, { kind: 'reply', text: SECOND_ANSWER });
    else chat.enqueue({ kind: 'reply', content: FIRST_ANSWER }, { kind: 'reply', content: SECOND_ANSWER });
  }

  /** The first turn, as JSON: its id is what the second turn continues from. */
  async function firstTurn(model: string): Promise<string> {
    const first = await client.responses.create({ model, input: FIRST_PROMPT });
    assert.equal(first.output_text, FIRST_ANSWER);
    assert.equal(first.previous_response_id, null);
    return first.id;
  }

  for (const model of ['native-test', 'translated-test']) {
    describe(model, () => {
      test('responses.create (JSON): the answer and the stored response echo previous_response_id', async () => {
        answers(model);
        const prev = await firstTurn(model);
        const second = await client.responses.create({ model, previous_response_id: prev, input: SECOND_PROMPT });
        assert.equal(second.output_text, SECOND_ANSWER);
        assert.equal(second.previous_response_id, prev);
        const stored = await client.responses.retrieve(second.id);
        assert.equal(stored.previous_response_id, prev);
        assert.equal(stored.output_text, SECOND_ANSWER);
      });

      test('responses.stream: response.created, response.completed, finalResponse and the stored response echo it', async () => {
        answers(model);
        const prev = await firstTurn(model);
        const stream = client.responses.stream({ model, previous_response_id: prev, input: SECOND_PROMPT });
        const events: ResponseStreamEvent[] = [];
        for await (const e of stream) events.push(e);
        const final = await stream.finalResponse();
        const byType = lifecycle(events);
        assert.equal(byType.get('response.created')?.previous_response_id, prev);
        assert.equal(byType.get('response.completed')?.previous_response_id, prev);
        assert.equal(final.previous_response_id, prev);
        assert.equal(final.output_text, SECOND_ANSWER);
        const stored = await client.responses.retrieve(final.id);
        assert.equal(stored.previous_response_id, prev);
        assert.equal(stored.output_text, SECOND_ANSWER);
      });

      test('responses.create stream: true: every lifecycle event and the stored response echo it', async () => {
        answers(model);
        const prev = await firstTurn(model);
        const events: ResponseStreamEvent[] = [];
        for await (const e of await client.responses.create({ model, previous_response_id: prev, input: SECOND_PROMPT, stream: true })) events.push(e);
        const byType = lifecycle(events);
        assert.deepEqual([...byType.keys()], ['response.created', 'response.in_progress', 'response.completed']);
        for (const [type, r] of byType) assert.equal(r.previous_response_id, prev, type);
        const completed = byType.get('response.completed');
        assert.ok(completed);
        assert.equal(outputText(completed), SECOND_ANSWER);
        const deltas = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');
        assert.equal(deltas, SECOND_ANSWER);
        const stored = await client.responses.retrieve(completed.id);
        assert.equal(stored.previous_response_id, prev);
        assert.equal(stored.output_text, SECOND_ANSWER);
      });
    });
  }
});
