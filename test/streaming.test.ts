/**
 * End-to-end streaming through a real gateway and fake OpenAI-compatible upstreams: unbuffered
 * delivery, exact SSE framing, client disconnects, the commit point (failover before the first
 * content chunk, an error event after it) and the stream idle timeout.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import OpenAI from 'openai';
import type { FakeUpstream } from './support/fake-openai-upstream.ts';
import { upstreamsWithGateway } from './support/suite.ts';

const KEY_A = 'sk-test-a-secret';
const KEY_B = 'sk-test-b-secret';

interface ReadEvent {
  /** the text after "data: " */
  data: string;
  /** performance.now() when the client had the whole event */
  at: number;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Reads an SSE body event by event as bytes arrive; also keeps the raw text. */
class SseReader {
  raw = '';
  private buf = '';
  private readonly dec = new TextDecoder();
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  private ended = false;

  constructor(res: Response) {
    assert.ok(res.body, 'response has a body');
    this.reader = res.body.getReader();
  }

  /** The next complete event, or undefined at the end of the body. */
  async next(): Promise<ReadEvent | undefined> {
    for (;;) {
      const i = this.buf.indexOf('\n\n');
      if (i >= 0) {
        const block = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 2);
        assert.match(block, /^data: /, `every SSE event is a single "data: " line, got ${JSON.stringify(block)}`);
        assert.ok(!block.includes('\n'), `an event has exactly one line, got ${JSON.stringify(block)}`);
        return { data: block.slice('data: '.length), at: performance.now() };
      }
      if (this.ended) {
        assert.equal(this.buf, '', 'the body does not end with a partial event');
        return undefined;
      }
      const r = await this.reader.read();
      if (r.done) {
        this.ended = true;
        this.raw += this.dec.decode();
        continue;
      }
      const text = this.dec.decode(r.value, { stream: true });
      this.raw += text;
      this.buf += text;
    }
  }

  async rest(): Promise<ReadEvent[]> {
    const out: ReadEvent[] = [];
    for (let e = await this.next(); e; e = await this.next()) out.push(e);
    return out;
  }

  async cancel(): Promise<void> {
    await this.reader.cancel().catch(() => {});
  }
}

/** The text a chat chunk carries (empty for role / finish / usage chunks). */
function contentOf(data: string): string {
  if (data === '[DONE]') return '';
  const j: unknown = JSON.parse(data);
  if (!isRecord(j) || !Array.isArray(j['choices'])) return '';
  let out = '';
  for (const ch of j['choices']) {
    if (isRecord(ch) && isRecord(ch['delta']) && typeof ch['delta']['content'] === 'string') out += ch['delta']['content'];
  }
  return out;
}

function errorOf(data: string): Record<string, unknown> | undefined {
  if (data === '[DONE]') return undefined;
  const j: unknown = JSON.parse(data);
  return isRecord(j) && isRecord(j['error']) ? j['error'] : undefined;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

describe('streaming through the gateway', () => {
  const ctx = upstreamsWithGateway({
    upstreams: { fakeA: { apiKey: KEY_A }, fakeB: { apiKey: KEY_B } },
    yaml: ({ fakeA, fakeB }) => `
# One attempt per target and no circuit breaker: retries and the breaker have their own tests (routing.test.ts).
routing: { retry: { max_retries: 0 }, breaker: { consecutive_failures: 0, min_requests: 1000000 } }
backends:
  a: { type: openai, base_url: "${fakeA.url}", api_key: "${KEY_A}", timeout_ms: 500, stream_idle_timeout_ms: 10000 }
  slow: { type: openai, base_url: "${fakeA.url}", api_key: "${KEY_A}", timeout_ms: 4000, stream_idle_timeout_ms: 300 }
  b: { type: openai, base_url: "${fakeB.url}", api_key: "${KEY_B}", timeout_ms: 4000 }
models:
  m: { targets: [ { backend: a, model: a-model }, { backend: b, model: b-model } ] }
  idle: { targets: [ { backend: slow, model: a-model }, { backend: b, model: b-model } ] }
`,
    extras: ({ gw }) => ({ client: new OpenAI({ baseURL: gw.baseURL, apiKey: 'unused', maxRetries: 0 }) }),
  });

  const chatStream = (model: string, init: { signal?: AbortSignal; includeUsage?: boolean } = {}): Promise<Response> =>
    fetch(`${ctx.gw.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model,
        stream: true,
        messages: [{ role: 'user', content: 'say something' }],
        ...(init.includeUsage ? { stream_options: { include_usage: true } } : {}),
      }),
      ...(init.signal ? { signal: init.signal } : {}),
    });

  test('is unbuffered: the first content chunk reaches the client while the upstream is still writing', async () => {
    const chunks = ['one ', 'two ', 'three ', 'four ', 'five'];
    ctx.fakeA.enqueue({ kind: 'stream', chunks, delayMs: 150 });
    const res = await chatStream('m');
    assert.equal(res.status, 200);
    const writes = ctx.fakeA.lastStreamWrites;
    const sse = new SseReader(res);
    let first: ReadEvent | undefined;
    let writesWhenFirstSeen = -1;
    for (let e = await sse.next(); e; e = await sse.next()) {
      if (contentOf(e.data) !== '') {
        first = e;
        writesWhenFirstSeen = writes.length;
        break;
      }
    }
    assert.ok(first, 'a content chunk arrived');
    const rest = await sse.rest();
    const lastWrite = writes[writes.length - 1];
    assert.ok(lastWrite !== undefined);
    // role + 5 content + finish + usage (the gateway always asks for usage) + [DONE]
    assert.ok(writes.length >= 8, `upstream wrote ${writes.length} events`);
    assert.ok(
      writesWhenFirstSeen < writes.length - 3,
      `the client had the first content chunk after ${writesWhenFirstSeen} of ${writes.length} upstream writes`,
    );
    assert.ok(first.at < lastWrite, 'the first content chunk reached the client before the upstream wrote its last chunk');
    assert.equal(contentOf(first.data) + rest.map((e) => contentOf(e.data)).join(''), chunks.join(''));
    assert.equal(rest[rest.length - 1]?.data, '[DONE]');
  });

  test('frames events exactly as `data: <json>\\n\\n` and ends with `data: [DONE]\\n\\n`', async () => {
    ctx.fakeA.enqueue({ kind: 'stream', chunks: ['Hello ', 'world'] });
    const res = await chatStream('m');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream\b/);
    assert.equal(res.headers.get('x-switchyard-backend'), 'a');
    assert.equal(res.headers.get('x-switchyard-attempts'), '1');
    const text = await res.text();
    assert.ok(text.endsWith('data: [DONE]\n\n'), `ends with [DONE]: ${JSON.stringify(text.slice(-40))}`);
    assert.equal(text.indexOf('data: [DONE]'), text.length - 'data: [DONE]\n\n'.length, '[DONE] only once, at the end');
    assert.ok(!text.includes('\r'), 'LF line endings');
    const blocks = text.split('\n\n');
    assert.equal(blocks.pop(), '', 'every event ends with a blank line');
    let content = '';
    for (const [i, block] of blocks.entries()) {
      assert.match(block, /^data: [^\n]+$/, `event ${i} is one data line`);
      const data = block.slice('data: '.length);
      if (i === blocks.length - 1) {
        assert.equal(data, '[DONE]');
        continue;
      }
      const j: unknown = JSON.parse(data);
      assert.ok(isRecord(j));
      assert.equal(j['object'], 'chat.completion.chunk');
      assert.ok(!('usage' in j), 'no usage field when the client did not ask for it');
      assert.ok(Array.isArray(j['choices']) && j['choices'].length === 1, 'no usage-only chunk when the client did not ask for it');
      content += contentOf(data);
    }
    assert.equal(content, 'Hello world');
    const lastJson = blocks[blocks.length - 2];
    assert.ok(lastJson);
    const finish: unknown = JSON.parse(lastJson.slice('data: '.length));
    assert.ok(isRecord(finish) && Array.isArray(finish['choices']));
    const ch: unknown = finish['choices'][0];
    assert.ok(isRecord(ch));
    assert.equal(ch['finish_reason'], 'stop');
  });

  test('passes the usage chunk through when the client asks for it', async () => {
    ctx.fakeA.enqueue({ kind: 'stream', chunks: ['Hi'] });
    const res = await chatStream('m', { includeUsage: true });
    const events = await new SseReader(res).rest();
    assert.equal(events[events.length - 1]?.data, '[DONE]');
    const usageEvent = events[events.length - 2];
    assert.ok(usageEvent);
    const j: unknown = JSON.parse(usageEvent.data);
    assert.ok(isRecord(j) && isRecord(j['usage']), 'the chunk before [DONE] carries usage');
    assert.deepEqual(j['choices'], []);
    assert.equal(typeof j['usage']['total_tokens'], 'number');
  });

  test('a client that disconnects mid-stream aborts the upstream request, and the gateway keeps serving', async () => {
    ctx.fakeA.enqueue({ kind: 'stream', chunks: Array.from({ length: 30 }, (_, i) => `w${i} `), delayMs: 100 });
    const ac = new AbortController();
    const res = await chatStream('m', { signal: ac.signal });
    assert.equal(res.status, 200);
    const sse = new SseReader(res);
    for (let e = await sse.next(); e; e = await sse.next()) if (contentOf(e.data) !== '') break;
    ac.abort();
    await sse.cancel();
    await withTimeout(ctx.fakeA.waitForClientAbort(), 3000, 'the upstream request to be aborted');
    assert.equal(ctx.fakeA.clientAborts, 1);
    assert.ok(ctx.fakeA.lastStreamWrites.length < 20, 'the upstream stopped writing long before the end');
    assert.equal(ctx.fakeB.requests.length, 0, 'no failover after a client disconnect');

    const again = await ctx.client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'still there?' }] });
    assert.equal(again.choices[0]?.message.content, 'Hello from a-model');
    const s = await ctx.client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'and streaming?' }] });
    let text = '';
    for await (const c of s) text += c.choices[0]?.delta.content ?? '';
    assert.equal(text, 'Hello from a-model');
  });

  describe('after the commit point (content already sent) a failure ends the stream with an error event', () => {
    const cases: Array<{ name: string; behaviour: Parameters<FakeUpstream['enqueue']>[0]; sent: string; codes: string[] }> = [
      {
        name: 'the upstream drops the connection (dropAfter)',
        behaviour: { kind: 'stream', chunks: ['alpha ', 'beta ', 'gamma ', 'delta'], dropAfter: 2 },
        sent: 'alpha beta ',
        codes: ['upstream_connection_lost', 'upstream_stream_truncated'],
      },
      {
        name: 'the upstream sends an error event (errorAfter)',
        behaviour: { kind: 'stream', chunks: ['alpha ', 'beta ', 'gamma'], errorAfter: { after: 2, message: `model overloaded (key ${KEY_A})` } },
        sent: 'alpha beta ',
        codes: ['upstream_stream_error'],
      },
      {
        name: 'the upstream stream ends without finish_reason or [DONE] (noDone + drop)',
        behaviour: { kind: 'stream', chunks: ['alpha ', 'beta'], noDone: true, dropAfter: 2 },
        sent: 'alpha beta',
        codes: ['upstream_connection_lost', 'upstream_stream_truncated'],
      },
    ];

    for (const c of cases) {
      test(`${c.name}: raw SSE ends with data: {"error":…} and no [DONE]`, async () => {
        ctx.fakeA.enqueue(c.behaviour);
        const res = await chatStream('m');
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('x-switchyard-backend'), 'a');
        const sse = new SseReader(res);
        const events = await sse.rest();
        assert.ok(!sse.raw.includes('[DONE]'), 'no [DONE] after a failure');
        assert.equal(events.map((e) => contentOf(e.data)).join(''), c.sent, 'content sent before the failure reached the client');
        const last = events[events.length - 1];
        assert.ok(last);
        const err = errorOf(last.data);
        assert.ok(err, `the final event is an error event: ${last.data}`);
        assert.deepEqual(Object.keys(err).sort(), ['code', 'message', 'param', 'type']);
        assert.equal(typeof err['message'], 'string');
        assert.ok(c.codes.includes(String(err['code'])), `code ${String(err['code'])} is one of ${c.codes.join(', ')}`);
        assert.equal(events.filter((e) => errorOf(e.data)).length, 1, 'exactly one error event');
        assert.ok(!sse.raw.includes(KEY_A) && !sse.raw.includes(KEY_B), 'no upstream key in the stream');
        assert.equal(ctx.fakeB.requests.length, 0, 'no failover after the commit point');
      });

      test(`${c.name}: the openai SDK throws an APIError from the for-await loop`, async () => {
        ctx.fakeA.enqueue(c.behaviour);
        const s = await ctx.client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'go' }] });
        let text = '';
        await assert.rejects(
          (async () => {
            for await (const chunk of s) text += chunk.choices[0]?.delta.content ?? '';
          })(),
          (err: unknown) => {
            assert.ok(err instanceof OpenAI.APIError, `an APIError, got ${String(err)}`);
            assert.ok(c.codes.includes(String(err.code)), `code ${String(err.code)}`);
            assert.ok(!err.message.includes(KEY_A));
            return true;
          },
        );
        assert.equal(text, c.sent);
      });
    }
  });

  describe('a failure before the first content chunk fails over to the next target', () => {
    const cases: Array<{ name: string; behaviour: Parameters<FakeUpstream['enqueue']>[0]; aborted?: boolean }> = [
      { name: 'upstream a answers 503', behaviour: { kind: 'error', status: 503, message: 'overloaded' } },
      { name: 'upstream a answers 429', behaviour: { kind: 'error', status: 429, message: 'slow down' } },
      { name: 'upstream a destroys the socket', behaviour: { kind: 'destroy' } },
      { name: 'upstream a hangs past timeout_ms', behaviour: { kind: 'hang' }, aborted: true },
      { name: 'upstream a sends headers and then nothing past timeout_ms', behaviour: { kind: 'hangAfterHeaders' }, aborted: true },
      { name: 'upstream a drops after the role chunk, before any content', behaviour: { kind: 'stream', chunks: ['x', 'y'], dropAfter: 0 } },
    ];
    for (const c of cases) {
      test(c.name, async () => {
        ctx.fakeA.enqueue(c.behaviour);
        const res = await chatStream('m');
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('x-switchyard-backend'), 'b');
        assert.equal(res.headers.get('x-switchyard-attempts'), '2');
        assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream\b/);
        const sse = new SseReader(res);
        const events = await sse.rest();
        assert.equal(events.map((e) => contentOf(e.data)).join(''), 'Hello from b-model', 'only b’s content, nothing from a');
        assert.equal(events.filter((e) => errorOf(e.data)).length, 0);
        assert.ok(sse.raw.endsWith('data: [DONE]\n\n'));
        assert.equal(ctx.fakeA.requests.length, 1);
        assert.equal(ctx.fakeB.requests.length, 1);
        if (c.aborted) {
          await withTimeout(ctx.fakeA.waitForClientAbort(), 2000, 'the timed-out upstream request to be aborted');
        }
      });
    }

    test('the same through the openai SDK', async () => {
      ctx.fakeA.enqueue({ kind: 'error', status: 502, message: 'bad gateway' });
      const { data: s, response } = await ctx.client.chat.completions
        .create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'go' }] })
        .withResponse();
      assert.equal(response.headers.get('x-switchyard-backend'), 'b');
      let text = '';
      for await (const chunk of s) text += chunk.choices[0]?.delta.content ?? '';
      assert.equal(text, 'Hello from b-model');
    });
  });

  test('stream idle timeout: an upstream that stalls after content gets an upstream_timeout error event', async () => {
    // role chunk at once, first content after 1.2 s (within timeout_ms 4000), then another 1.2 s of
    // silence — far longer than stream_idle_timeout_ms (300).
    ctx.fakeA.enqueue({ kind: 'stream', chunks: ['first ', 'second ', 'third'], delayMs: 1200 });
    const res = await chatStream('idle');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-switchyard-backend'), 'slow');
    const sse = new SseReader(res);
    const events = await sse.rest();
    const firstContent = events.find((e) => contentOf(e.data) !== '');
    assert.ok(firstContent, 'the first content chunk arrived');
    assert.equal(events.map((e) => contentOf(e.data)).join(''), 'first ');
    const last = events[events.length - 1];
    assert.ok(last);
    const err = errorOf(last.data);
    assert.ok(err, `the stream ends with an error event, got ${last.data}`);
    assert.equal(err['code'], 'upstream_timeout');
    assert.equal(err['type'], 'timeout_error');
    assert.ok(!sse.raw.includes('[DONE]'));
    const gap = last.at - firstContent.at;
    assert.ok(gap >= 200, `the idle timeout did not fire early (${gap.toFixed(0)} ms)`);
    assert.ok(gap < 1100, `the error came about stream_idle_timeout_ms after the last chunk, before the upstream's next chunk (${gap.toFixed(0)} ms)`);
    await withTimeout(ctx.fakeA.waitForClientAbort(), 2000, 'the stalled upstream request to be aborted');
    assert.equal(ctx.fakeB.requests.length, 0, 'no failover after the commit point');
  });

  test('the stream idle timer is re-armed by every chunk: a long stream of steady chunks completes', async () => {
    // gaps of 100 ms: the whole stream outlasts stream_idle_timeout_ms (300) but no gap does.
    ctx.fakeA.enqueue({ kind: 'stream', chunks: ['a ', 'b ', 'c ', 'd'], delayMs: 100 });
    const res = await chatStream('idle');
    const sse = new SseReader(res);
    const events = await sse.rest();
    assert.equal(events.map((e) => contentOf(e.data)).join(''), 'a b c d');
    assert.equal(events[events.length - 1]?.data, '[DONE]');
  });
});
