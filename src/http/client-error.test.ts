import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { answerClientError, parserError } from './client-error.ts';

/** What answerClientError writes for a parser failure with this code. */
function answer(code: string): string {
  const socket = new PassThrough();
  let out = '';
  socket.on('data', (b: Buffer) => (out += b.toString()));
  answerClientError(Object.assign(new Error('x'), { code }), socket);
  return out;
}

describe('answers to what the HTTP parser refuses', () => {
  it('each failure is its row of the error table, in the OpenAI envelope, and the connection closes', () => {
    for (const [code, status, reason, wire] of [
      ['HPE_HEADER_OVERFLOW', 431, 'Request Header Fields Too Large', 'headers_too_large'],
      ['ERR_HTTP_REQUEST_TIMEOUT', 408, 'Request Timeout', 'request_timeout'],
      ['HPE_INVALID_METHOD', 400, 'Bad Request', 'bad_request'],
    ] as const) {
      const text = answer(code);
      const [head = '', body = ''] = text.split('\r\n\r\n');
      assert.match(head, new RegExp(`^HTTP/1\\.1 ${status} ${reason}\\r\\n`));
      assert.match(head, /\r\nconnection: close/);
      assert.match(head, new RegExp(`\\r\\ncontent-length: ${Buffer.byteLength(body)}(\\r\\n|$)`));
      const e = JSON.parse(body) as { error: { type: string; code: string; message: string; param: null } };
      assert.equal(e.error.type, 'invalid_request_error');
      assert.equal(e.error.code, wire);
      assert.equal(e.error.param, null);
      assert.equal(e.error.message, parserError(Object.assign(new Error('x'), { code })).message);
      assert.notEqual(e.error.message, wire, 'a sentence from the table, not the bare code');
    }
  });
});
