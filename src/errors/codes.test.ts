import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { ERROR_CODES, ERRORS, assertNever, errorSpec, type Disposition, type ErrorCode } from './codes.ts';
import { GatewayError, toOpenAIError } from './gateway-error.ts';

/** The rows of the "Every error" table in docs/api.md, by their first cell. */
function documentedRows(): Map<string, string[]> {
  const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
  const start = doc.indexOf('### Every error');
  assert.ok(start >= 0, 'docs/api.md has a "### Every error" section');
  const rest = doc.slice(start);
  const lines = rest.split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const rows = new Map<string, string[]>();
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line.split('|').slice(1, -1).map((c) => c.trim());
    const code = /^`([a-z_]+)`$/.exec(cells[0] ?? '')?.[1];
    assert.ok(code, `a row names its code: ${line}`);
    assert.ok(!rows.has(code), `${code} is listed once`);
    rows.set(code, cells);
  }
  return rows;
}

function routerCell(d: Disposition): string {
  switch (d) {
    case 'fatal':
    case 'retry':
    case 'failover':
      return d;
    default:
      return assertNever(d);
  }
}

describe('the error table', () => {
  it('docs/api.md lists every code with its status, types, router disposition and wire code', () => {
    const rows = documentedRows();
    assert.deepEqual([...rows.keys()].sort(), [...ERROR_CODES].sort());
    for (const code of ERROR_CODES) {
      const s = errorSpec(code);
      const [, status, type, anthropic, router, wire] = rows.get(code) ?? [];
      assert.equal(status, s.status === 'upstream' ? "the upstream's 4xx" : String(s.status), `${code} status`);
      assert.equal(type, `\`${s.type}\``, `${code} type`);
      assert.equal(anthropic, `\`${s.anthropic}\``, `${code} Anthropic type`);
      assert.equal(router, routerCell(s.disposition), `${code} router`);
      const shown = s.wire === undefined ? code : String(s.wire);
      assert.ok(wire?.startsWith(`\`${shown}\``), `${code} sends code ${shown}: ${wire}`);
    }
  });

  it('client faults and client disconnects never count against a breaker; target failures do', () => {
    for (const code of ERROR_CODES) assert.equal(errorSpec(code).breaker, errorSpec(code).disposition !== 'fatal', code);
  });

  it("a 503 is Anthropic's overloaded_error (answered as 529), and only a 503 is", () => {
    for (const code of ERROR_CODES) assert.equal(ERRORS[code].status === 503, ERRORS[code].anthropic === 'overloaded_error', code);
  });

  it('builds the OpenAI envelope from the table: default message, wire code, upstream status', () => {
    assert.deepEqual(toOpenAIError(new GatewayError('draining')), {
      error: { message: 'The gateway is shutting down.', type: 'service_unavailable_error', param: null, code: 'draining' },
    });
    const rejected = new GatewayError('upstream_rejected', 'too long', { upstreamStatus: 422, wireCode: 'context_length_exceeded', param: 'messages' });
    assert.deepEqual([rejected.status, rejected.kind, rejected.disposition], [422, 'upstream_rejected', 'fatal']);
    assert.deepEqual(toOpenAIError(rejected).error, { message: 'too long', type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' });
    const fixed = new GatewayError('upstream_timeout', 'slow', { upstreamStatus: 418 });
    assert.equal(fixed.status, 504, 'a fixed status is not overridden');
    const none: ErrorCode = 'item_not_found';
    assert.equal(new GatewayError(none, 'gone').code, null);
  });
});
