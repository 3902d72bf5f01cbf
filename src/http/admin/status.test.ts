import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderStatusHtml, type StatusReport } from './status.ts';

const EVIL = `<img src=x onerror="alert('x')">&`;

function report(): StatusReport {
  const none = { samples: 0, p50_ms: null, p95_ms: null };
  return {
    version: EVIL,
    generated_at: '2026-01-02T03:04:05.000Z',
    uptime_s: 1,
    ready: true,
    draining: false,
    in_flight: 0,
    models: [
      {
        name: EVIL,
        policy: EVIL,
        targets: [
          {
            backend: EVIL,
            model: EVIL,
            backend_status: EVIL,
            breaker: 'open',
            breaker_open_until: '2026-01-02T03:05:05.000Z',
            breaker_opened_at: '2026-01-02T03:04:00.000Z',
            breaker_retry_in_ms: 60_000,
            breaker_window_failure_rate: 0,
            error_rate: 1,
            calls: { window_s: 300, ok: 0, failed: 5 },
            latency: none,
            ttft: none,
            last_error: { message: EVIL, code: EVIL, status: 502, at: '2026-01-02T03:04:00.000Z' },
            latency_score_ms: 10_000,
            ttft_score_ms: null,
            samples: 5,
            busy: EVIL,
            price: null,
          },
        ],
      },
    ],
    extras: {
      cache: { enabled: true, hit: 1, miss: 1, bypass: 0, coalesced: 0, entries: 1, hit_rate: 0.5 },
      keys: {
        state: { store: 'redis', state: 'degraded', detail: EVIL },
        [EVIL]: { limits: 'none' },
        other: { error: EVIL },
      },
      [EVIL]: { [EVIL]: EVIL, nested: { deep: EVIL } },
    },
  };
}

describe('status page HTML', () => {
  it('escapes every value it renders', () => {
    const html = renderStatusHtml(report());
    assert.ok(!html.includes('<img'), 'no markup from the data');
    assert.ok(!/onerror="/.test(html));
    const escaped = html.split('&lt;img src=x onerror=&quot;alert(&#39;x&#39;)&quot;&gt;&amp;').length - 1;
    // version, model, policy, backend, upstream model, status, last error code and message, busy,
    // store detail, key name, key error, section name, field name, field value (the nested one is
    // JSON text, its quotes escaped differently; the first assertion covers it)
    assert.ok(escaped >= 15, `escaped occurrences: ${escaped}`);
  });

  it('shows the open period and the last error with their times', () => {
    const html = renderStatusHtml(report());
    assert.match(html, /open<small>until 03:05:05Z \(in 60 s\)<\/small>/);
    assert.match(html, /<small>03:04:00Z, 5\.0 s ago<\/small>/);
  });
});
