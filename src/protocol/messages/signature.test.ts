import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { gatewaySignature, gatewayThinkingCount, isGatewaySignature, ThinkingSigner, withoutGatewayThinking } from './signature.ts';

describe('gateway thinking signatures', () => {
  it('swy1. + base64url SHA-256 of the text; the same streamed in pieces; never an Anthropic (base64) signature', () => {
    const s = gatewaySignature('I should call ls.');
    assert.match(s, /^swy1\.[A-Za-z0-9_-]{43}$/);
    const signer = new ThinkingSigner();
    for (const p of ['I should ', 'call ', 'ls.']) signer.update(p);
    assert.equal(signer.digest(), s);
    assert.notEqual(gatewaySignature('I should call ls!'), s);
    assert.ok(isGatewaySignature(s));
    for (const other of ['EqQBCkYIBxgCKkBsig+/=', '', undefined, null, 'swy1']) assert.ok(!isGatewaySignature(other), String(other));
  });

  it('withoutGatewayThinking: only gateway-signed and unsigned thinking blocks leave; the input is not modified; none → the same object', () => {
    const mine = { type: 'thinking', thinking: 'translated', signature: gatewaySignature('translated') };
    const theirs = { type: 'thinking', thinking: 'native', signature: 'EqQBsig+/=' };
    const redacted = { type: 'redacted_thinking', data: 'EmwKAhgB' };
    const body = {
      model: 'claude',
      max_tokens: 10,
      messages: [
        { role: 'user', content: 'q1' },
        { role: 'assistant', content: [theirs, redacted, { type: 'text', text: 'a1' }] },
        { role: 'user', content: 'q2' },
        { role: 'assistant', content: [mine, { type: 'tool_use', id: 't', name: 'f', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'ok' }] },
        { role: 'assistant', content: [{ ...mine }] },
        { role: 'user', content: 'q3' },
      ],
    };
    const before = JSON.stringify(body);
    assert.equal(gatewayThinkingCount(body), 2);
    const r = withoutGatewayThinking(body);
    assert.equal(r.dropped, 2);
    assert.equal(JSON.stringify(body), before);
    assert.deepEqual(r.body.messages, [
      body.messages[0],
      body.messages[1],
      body.messages[2],
      { role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'f', input: {} }] },
      // a turn that held only the dropped block is left out; the user turns around it become one
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'ok' }, { type: 'text', text: 'q3' }] },
    ]);
    assert.equal(r.body.messages[1], body.messages[1], 'untouched turns are the same objects');

    // no signature, or an empty one: Anthropic refuses those too
    const unsigned = { model: 'claude', messages: [{ role: 'assistant', content: [{ type: 'thinking', thinking: 'a', signature: '' }, { type: 'thinking', thinking: 'b' }, theirs] }] };
    assert.equal(gatewayThinkingCount(unsigned), 2);
    assert.deepEqual(withoutGatewayThinking(unsigned).body.messages, [{ role: 'assistant', content: [theirs] }]);

    const clean = { model: 'claude', messages: [body.messages[1]] };
    const same = withoutGatewayThinking(clean);
    assert.equal(same.body, clean);
    assert.equal(same.dropped, 0);
    assert.equal(gatewayThinkingCount(clean), 0);
    assert.equal(withoutGatewayThinking({ model: 'x' }).dropped, 0);
  });
});
