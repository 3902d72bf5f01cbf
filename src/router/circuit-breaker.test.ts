import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CircuitBreaker, type BreakerConfig } from './circuit-breaker.ts';

const cfg: BreakerConfig = { failure_rate: 0.5, min_requests: 4, window_ms: 10_000, consecutive_failures: 0, open_ms: 1000, max_open_ms: 5000 };

describe('CircuitBreaker', () => {
  it('stays closed below min_requests even at 100% failures', () => {
    const b = new CircuitBreaker(cfg);
    for (let i = 0; i < 3; i++) b.record('failure', 100 + i);
    assert.equal(b.stateAt(200), 'closed');
    assert.equal(b.tryAcquire(200), true);
  });

  it('opens when the failure rate over the window reaches the threshold', () => {
    const b = new CircuitBreaker(cfg);
    b.record('success', 0);
    b.record('success', 1);
    b.record('failure', 2);
    assert.equal(b.stateAt(3), 'closed');
    b.record('failure', 3); // 2/4 = 0.5
    assert.equal(b.stateAt(4), 'open');
    assert.equal(b.tryAcquire(4), false);
    assert.equal(b.retryInMs(4), 999);
  });

  it('forgets outcomes older than the window', () => {
    const b = new CircuitBreaker(cfg);
    b.record('failure', 0);
    b.record('failure', 1);
    b.record('failure', 2);
    // 12 s later the three failures are out of the 10 s window
    b.record('failure', 12_000);
    assert.equal(b.stateAt(12_001), 'closed');
    assert.equal(b.failureRate(12_001), 1);
  });

  it('opens after N consecutive failures, and a success resets the count', () => {
    const b = new CircuitBreaker({ ...cfg, min_requests: 1000, consecutive_failures: 3 });
    b.record('failure', 0);
    b.record('failure', 1);
    b.record('success', 2);
    b.record('failure', 3);
    b.record('failure', 4);
    assert.equal(b.stateAt(5), 'closed');
    b.record('failure', 5);
    assert.equal(b.stateAt(6), 'open');
  });

  it('half-open lets exactly one probe through; success closes', () => {
    const b = new CircuitBreaker({ ...cfg, consecutive_failures: 1 });
    b.record('failure', 0);
    assert.equal(b.stateAt(999), 'open');
    assert.equal(b.stateAt(1000), 'half_open');
    assert.equal(b.tryAcquire(1000), true, 'the probe');
    assert.equal(b.tryAcquire(1001), false, 'no second request while the probe is out');
    assert.equal(b.wouldAllow(1001), false);
    b.record('success', 1100);
    assert.equal(b.stateAt(1100), 'closed');
    assert.equal(b.tryAcquire(1100), true);
    assert.equal(b.tryAcquire(1100), true);
  });

  it('a failed probe reopens with a doubled open time, capped at max_open_ms', () => {
    const b = new CircuitBreaker({ ...cfg, consecutive_failures: 1 });
    b.record('failure', 0); // open 1000
    let t = 1000;
    const opens: number[] = [];
    for (let i = 0; i < 5; i++) {
      assert.equal(b.tryAcquire(t), true);
      b.record('failure', t);
      const wait = b.retryInMs(t);
      opens.push(wait);
      t += wait;
    }
    assert.deepEqual(opens, [2000, 4000, 5000, 5000, 5000]);
    // and success after that resets the open time to open_ms
    assert.equal(b.tryAcquire(t), true);
    b.record('success', t);
    b.record('failure', t + 1);
    assert.equal(b.retryInMs(t + 1), 1000);
  });

  it('neutral outcomes (client faults, client aborts) never move it, and free a probe slot', () => {
    const b = new CircuitBreaker({ ...cfg, min_requests: 1, consecutive_failures: 1 });
    for (let i = 0; i < 10; i++) b.record('neutral', i);
    assert.equal(b.stateAt(10), 'closed');
    b.record('failure', 10);
    assert.equal(b.tryAcquire(1010), true);
    b.record('neutral', 1011);
    assert.equal(b.stateAt(1011), 'half_open', 'still half-open');
    assert.equal(b.tryAcquire(1012), true, 'a new probe may go');
  });

  it('late outcomes of requests started before it opened are ignored', () => {
    const b = new CircuitBreaker({ ...cfg, consecutive_failures: 1 });
    b.record('failure', 0);
    b.record('success', 10);
    assert.equal(b.stateAt(10), 'open');
  });
});

describe('CircuitBreaker snapshot', () => {
  it('says when it opened and until when, and nothing of the kind while closed', () => {
    const b = new CircuitBreaker({ ...cfg, consecutive_failures: 2 });
    assert.deepEqual(
      { ...b.snapshot(0), failure_rate: 0 },
      { state: 'closed', failure_rate: 0, open_ms: 1000, retry_in_ms: 0, opened_at: null, open_until: null, probe_in_flight: false },
    );
    b.record('failure', 100);
    b.record('failure', 200);
    const open = b.snapshot(300);
    assert.equal(open.state, 'open');
    assert.equal(open.opened_at, 200);
    assert.equal(open.open_until, 1200);
    assert.equal(open.retry_in_ms, 900);
    // the open period is over: half-open, the probe goes, it fails: open for twice as long
    assert.equal(b.tryAcquire(1200), true);
    assert.equal(b.snapshot(1300).probe_in_flight, true);
    assert.equal(b.snapshot(1300).open_until, null);
    b.record('failure', 1300);
    assert.deepEqual([b.snapshot(1400).opened_at, b.snapshot(1400).open_until], [1300, 3300]);
  });
});
