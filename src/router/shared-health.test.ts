/**
 * Shared breakers between two replicas (two HealthStates) through one store, on a fake clock with
 * the periodic sync driven by hand (`sync()` is the tick's work).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryStore } from '../state/store/memory.ts';
import type { StateStore } from '../state/store/contract.ts';
import type { BreakerConfig } from './circuit-breaker.ts';
import { HealthState } from './health-state.ts';
import { QUIET_SEND_MS } from './shared-health.ts';

const cfg: BreakerConfig = { failure_rate: 0.5, min_requests: 4, window_ms: 10_000, consecutive_failures: 3, open_ms: 1000, max_open_ms: 8000 };

function fleet(n: number, breaker = cfg) {
  const clock = { t: 1_000_000 };
  const now = (): number => clock.t;
  const store = new MemoryStore({ maxEntries: 10, maxBytes: 1 << 20, now });
  const replicas = Array.from({ length: n }, () => {
    const h = new HealthState(breaker, now);
    h.share(store, undefined, 0);
    return h;
  });
  const syncAll = async (): Promise<void> => {
    await new Promise((r) => setImmediate(r));
    for (const r of replicas) await r.sync();
  };
  return { clock, store, replicas, syncAll };
}

describe('shared breakers (routing.shared_health)', () => {
  it('failures on one replica open the breaker on every replica', async () => {
    const { clock, replicas, syncAll } = fleet(2);
    const [a, b] = replicas as [HealthState, HealthState];
    const ba = a.get('up', 'm').breaker;
    const bb = b.get('up', 'm').breaker;
    await syncAll();
    for (let i = 0; i < 3; i++) {
      assert.equal(ba.tryAcquire(clock.t), true);
      ba.record('failure', clock.t);
    }
    await syncAll();
    assert.equal(bb.stateAt(clock.t), 'open');
    assert.equal(bb.tryAcquire(clock.t), false, 'replica B never sends to it');
    assert.equal(b.snapshot(clock.t)[0]?.state, 'open');
  });

  it('counts failures of all replicas together in one window', async () => {
    const { clock, replicas, syncAll } = fleet(2, { ...cfg, consecutive_failures: 0 });
    const [a, b] = replicas as [HealthState, HealthState];
    const ba = a.get('up', 'm').breaker;
    const bb = b.get('up', 'm').breaker;
    // A: success, failure; B: success, failure → 2 / 4 across the fleet, 1 / 2 on each
    ba.record('success', clock.t);
    bb.record('success', clock.t);
    ba.record('failure', clock.t);
    await syncAll();
    assert.equal(bb.stateAt(clock.t), 'closed');
    bb.record('failure', clock.t);
    await syncAll();
    assert.equal(ba.stateAt(clock.t), 'open');
    assert.equal(bb.stateAt(clock.t), 'open');
  });

  it('half-open lets exactly one probe through across replicas; its failure re-opens it for all', async () => {
    const { clock, replicas, syncAll } = fleet(3);
    const breakers = replicas.map((r) => r.get('up', 'm').breaker);
    const first = breakers[0];
    assert.ok(first);
    for (let i = 0; i < 3; i++) first.record('failure', clock.t);
    await syncAll();
    clock.t += 1000;
    // every replica sees half-open; the first request on each asks for the lease and is refused
    for (const br of breakers) {
      assert.equal(br.stateAt(clock.t), 'half_open');
      assert.equal(br.tryAcquire(clock.t), false);
    }
    await syncAll();
    // exactly one replica won the lease: the others keep refusing however often they are asked
    const probers: typeof breakers = [];
    for (let round = 0; round < 3; round++) for (const br of breakers) if (br.tryAcquire(clock.t)) probers.push(br);
    assert.equal(probers.length, 1);
    for (const br of breakers) assert.equal(br.snapshot(clock.t).state, 'half_open');
    probers[0]?.record('failure', clock.t);
    await syncAll();
    for (const br of breakers) {
      assert.equal(br.stateAt(clock.t), 'open');
      assert.equal(br.snapshot(clock.t).open_ms, 2000, 'a failed probe doubles the open period');
    }
    clock.t += 1999;
    for (const br of breakers) assert.equal(br.tryAcquire(clock.t), false);
  });

  it("a successful probe closes the breaker on every replica", async () => {
    const { clock, replicas, syncAll } = fleet(2);
    const [ba, bb] = replicas.map((r) => r.get('up', 'm').breaker) as [ReturnType<HealthState['get']>['breaker'], ReturnType<HealthState['get']>['breaker']];
    for (let i = 0; i < 3; i++) ba.record('failure', clock.t);
    await syncAll();
    clock.t += 1000;
    assert.equal(bb.tryAcquire(clock.t), false, 'asks for the lease');
    await syncAll();
    assert.equal(bb.tryAcquire(clock.t), true, 'the probe');
    assert.equal(ba.tryAcquire(clock.t), false);
    bb.record('success', clock.t);
    await syncAll();
    assert.equal(ba.stateAt(clock.t), 'closed');
    assert.equal(ba.tryAcquire(clock.t), true);
  });

  it('a lease not used is given back, so another replica can probe', async () => {
    const { clock, replicas, syncAll } = fleet(2);
    const [ba, bb] = replicas.map((r) => r.get('up', 'm').breaker) as [ReturnType<HealthState['get']>['breaker'], ReturnType<HealthState['get']>['breaker']];
    for (let i = 0; i < 3; i++) ba.record('failure', clock.t);
    await syncAll();
    clock.t += 1000;
    assert.equal(ba.tryAcquire(clock.t), false);
    await syncAll(); // A holds the lease but gets no more traffic
    assert.equal(bb.tryAcquire(clock.t), false);
    clock.t += 1001;
    await syncAll(); // A gives it back
    assert.equal(bb.tryAcquire(clock.t), false, 'asks for it');
    await syncAll();
    assert.equal(bb.tryAcquire(clock.t), true);
  });

  it('shares the latency score of the latency policy', async () => {
    const { clock, replicas, syncAll } = fleet(2);
    const [a, b] = replicas as [HealthState, HealthState];
    const stats = b.get('up', 'm').stats;
    assert.equal(stats.estimate().total, undefined);
    a.get('up', 'm').stats.observeSuccess(clock.t, 400, 100);
    await syncAll();
    const est = stats.estimate();
    assert.equal(est.total, 400);
    assert.equal(est.ttft, 100);
    assert.equal(est.samples, 1);
    assert.equal(b.get('up', 'm').stats.report(clock.t).ok, 0, "the operator's report stays per replica");
  });

  it('falls back to its own breaker when the store fails, and never throws', async () => {
    const clock = { t: 0 };
    const now = (): number => clock.t;
    let fail = false;
    const mem = new MemoryStore({ maxEntries: 10, maxBytes: 1 << 20, now });
    const store = {
      health: (ops: Parameters<MemoryStore['health']>[0], s: Parameters<MemoryStore['health']>[1]) => (fail ? Promise.reject(new Error('down')) : mem.health(ops, s)),
    } as unknown as StateStore;
    const warned: string[] = [];
    const logger = { level: 'info', debug() {}, info() {}, warn: (m: string) => warned.push(m), error() {} } as const;
    const [a, b] = [new HealthState(cfg, now), new HealthState(cfg, now)];
    a.share(store, logger, 0);
    b.share(mem, undefined, 0);
    const ba = a.get('up', 'm').breaker;
    const bb = b.get('up', 'm').breaker;
    await a.sync();
    await b.sync();
    fail = true;
    await a.sync();
    await a.sync();
    assert.equal(warned.length, 1, 'logged once');
    // A's own failures open A's own breaker; the shared one (B) never heard of them
    for (let i = 0; i < 3; i++) ba.record('failure', clock.t);
    await new Promise((r) => setImmediate(r));
    assert.equal(ba.stateAt(clock.t), 'open');
    await b.sync();
    assert.equal(bb.stateAt(clock.t), 'closed');
    fail = false;
    await a.sync();
    assert.equal(ba.stateAt(clock.t), 'closed', 'back on the shared state');
    assert.equal(warned.length, 2, 'recovery logged');
  });

  it('successes wait quietly and travel as one counted run; a failure goes at once; one send per store round trip', async () => {
    const clock = { t: 1_000_000 };
    const now = (): number => clock.t;
    const mem = new MemoryStore({ maxEntries: 10, maxBytes: 1 << 20, now });
    type Health = MemoryStore['health'];
    // a store whose answers wait until the test lets them go; the events of each send
    const held: Array<() => void> = [];
    const sent: string[][] = [];
    let settings: Parameters<Health>[1] | undefined;
    const store = {
      health: (ops: Parameters<Health>[0], s: Parameters<Health>[1]) => {
        settings = s;
        sent.push(ops.flatMap((op) => op.events.map((e) => (e.k === 's' && e.n !== undefined ? `s${e.n}` : e.k))));
        return new Promise((resolve) => held.push(() => resolve(mem.health(ops, s))));
      },
    } as unknown as StateStore;
    const h = new HealthState(cfg, now);
    h.share(store, undefined, 0);
    const { breaker: br, stats } = h.get('up', 'm');
    const turn = (): Promise<void> => new Promise((r) => setImmediate(r));
    // a new target asks for its view at once: nothing queued yet, so nothing sent
    await turn();
    for (let i = 0; i < 3; i++) {
      br.record('success', clock.t);
      stats.observeSuccess(clock.t, 10 + i);
    }
    await turn();
    assert.equal(sent.length, 0, 'successes alone do not go after their turn');
    await new Promise((r) => setTimeout(r, QUIET_SEND_MS + 20));
    assert.deepEqual(sent, [['s3', 'l', 'l', 'l']], 'within QUIET_SEND_MS: the run of three as one event, the latency samples after it');
    for (let i = 0; i < 5; i++) br.record('success', clock.t);
    br.record('failure', clock.t);
    await turn();
    assert.equal(sent.length, 1, 'nothing more while that send is unanswered');
    held.shift()?.();
    await turn();
    await turn();
    assert.deepEqual(sent[1], ['s5', 'f'], 'once it is answered, the failure goes at once, with the successes before it, in order');
    held.shift()?.();
    await turn();
    const [view] = mem.healthSync([{ target: 'up/m', owner: 'test', events: [] }], settings as Parameters<Health>[1]);
    assert.equal(view?.ok, 8, 'every success reached the store');
    assert.equal(view?.fail, 1);
    assert.equal(view?.samples, 3);
    // with a send on its way, a target with 250 events queued goes without waiting for it
    br.record('failure', clock.t);
    await turn();
    for (let i = 0; i < 250; i++) stats.observeSuccess(clock.t, 5);
    await turn();
    assert.equal(sent.length, 4);
    assert.equal(sent[3]?.length, 250);
    for (const release of held.splice(0)) release();
  });

  it('without sharing, two HealthStates keep separate breakers', () => {
    const a = new HealthState(cfg);
    const b = new HealthState(cfg);
    for (let i = 0; i < 3; i++) a.get('up', 'm').breaker.record('failure', 0);
    assert.equal(a.get('up', 'm').breaker.stateAt(1), 'open');
    assert.equal(b.get('up', 'm').breaker.stateAt(1), 'closed');
  });
});
