import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { asErrorData, normalizeLlamaSse } from './llamacpp-sse.ts';

async function run(chunks: string[]): Promise<string> {
  const enc = new TextEncoder();
  const src = new ReadableStream<Uint8Array>({
    start(c) {
      for (const ch of chunks) c.enqueue(enc.encode(ch));
      c.close();
    },
  });
  let out = '';
  const dec = new TextDecoder();
  for await (const b of src.pipeThrough(normalizeLlamaSse())) out += dec.decode(b, { stream: true });
  return out;
}

const CHUNK = 'data: {"choices":[{"delta":{"content":"hi"},"index":0}]}\n\n';

describe('llama-server SSE normalization', () => {
  it('passes ordinary events through byte for byte, including pings and [DONE]', async () => {
    const input = [CHUNK, ':\n\n', CHUNK, 'data: [DONE]\n\n'];
    assert.equal(await run(input), input.join(''));
  });

  it('current servers: `data: {"error":…}` is left as it is', async () => {
    const e = 'data: {"error":{"code":500,"message":"boom","type":"server_error"}}\n\n';
    assert.equal(await run([CHUNK, e]), CHUNK + e);
  });

  it('older servers: an `error:` line becomes a data event with an "error" key, split across reads or not', async () => {
    const line = 'error: {"code":400,"message":"the request exceeds the available context size","type":"invalid_request_error"}\n\n';
    const want = `data: {"error":{"code":400,"message":"the request exceeds the available context size","type":"invalid_request_error"}}\n\ndata: [DONE]\n\n`;
    assert.equal(await run([CHUNK, line, 'data: [DONE]\n\n']), CHUNK + want);
    const joined = CHUNK + line + 'data: [DONE]\n\n';
    const pieces = [joined.slice(0, 70), joined.slice(70, 75), joined.slice(75)];
    assert.equal(await run(pieces), CHUNK + want);
    assert.equal(await run(['error: {"error":{"message":"x"}}\n\n']), 'data: {"error":{"message":"x"}}\n\n');
  });

  it('`event: error` framing: the event line goes, its data gets an "error" key', async () => {
    assert.equal(await run(['event: error\ndata: {"message":"bad","type":"server_error"}\n\n', CHUNK]), 'data: {"error":{"message":"bad","type":"server_error"}}\n\n' + CHUNK);
    assert.equal(await run(['event: message\n', CHUNK]), 'event: message\n' + CHUNK);
  });

  it('a last event without its blank line is completed', async () => {
    assert.equal(await run(['error: {"message":"cut"}']), 'data: {"error":{"message":"cut"}}\n\n');
  });

  it('asErrorData wraps whatever the error payload was', () => {
    assert.equal(asErrorData('{"error":{"message":"a"}}'), '{"error":{"message":"a"}}');
    assert.equal(asErrorData('{"message":"a"}'), '{"error":{"message":"a"}}');
    assert.equal(asErrorData('"a"'), '{"error":{"message":"a"}}');
    assert.equal(asErrorData('not json'), '{"error":{"message":"not json"}}');
  });
});
