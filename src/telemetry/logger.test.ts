/**
 * The stdout sink: lines of one flush interval leave in one write, in order; a big backlog is
 * written at once; nothing is lost or reordered.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLogger, isoNow, stdoutSink } from './logger.ts';

describe('stdoutSink', () => {
  test('lines of one flush interval are written together, in order, when it ends', async () => {
    const writes: string[] = [];
    const log = createLogger('info', stdoutSink((t) => writes.push(t), 30));
    log.info('one', { n: 1 });
    await sleep(5);
    log.info('two', { n: 2 });
    log.debug('hidden');
    assert.equal(writes.length, 0, 'nothing written synchronously');
    await sleep(60);
    assert.equal(writes.length, 1, 'one write for both lines');
    const lines = (writes[0] ?? '').trimEnd().split('\n').map((l) => JSON.parse(l) as { msg: string; n: number });
    assert.deepEqual(
      lines.map((l) => [l.msg, l.n]),
      [
        ['one', 1],
        ['two', 2],
      ],
    );
    log.warn('three');
    await sleep(60);
    assert.equal(writes.length, 2);
    assert.match(writes[1] ?? '', /"msg":"three"/);
  });

  test('a backlog over 64 KiB is written at once, and the rest follows', async () => {
    const writes: string[] = [];
    const sink = stdoutSink((t) => writes.push(t), 10);
    const line = `${'x'.repeat(1023)}\n`;
    for (let i = 0; i < 100; i++) sink(line);
    assert.equal(writes.length, 1, 'flushed when the backlog reached 64 KiB');
    await sleep(40);
    assert.equal(writes.join('').length, 100 * 1024);
  });
});

describe('createLogger lines', () => {
  test('one JSON object per line: time, level, msg, then the fields; undefined fields left out; a field named msg replaces it', () => {
    const lines: string[] = [];
    const log = createLogger('debug', (l) => lines.push(l));
    log.info('request', { status: 200, model: 'm', key: undefined, ok: true, cost: null });
    log.warn('bare');
    log.debug('empty', {});
    log.error('renamed', { msg: 'override', level: 'x' });
    assert.ok(lines.every((l) => l.endsWith('\n') && l.indexOf('\n') === l.length - 1));
    const [a, b, c, d] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(Object.keys(a ?? {}), ['time', 'level', 'msg', 'status', 'model', 'ok', 'cost']);
    assert.equal(a?.level, 'info');
    assert.ok(!Number.isNaN(Date.parse(String(a?.time))));
    assert.deepEqual(b, { time: b?.time, level: 'warn', msg: 'bare' });
    assert.deepEqual(c, { time: c?.time, level: 'debug', msg: 'empty' });
    assert.deepEqual(d, { time: d?.time, level: 'x', msg: 'override' });
  });
});

describe('isoNow', () => {
  test('is Date#toISOString for any millisecond, also when time goes back or jumps', () => {
    const base = Date.UTC(2026, 10, 30, 23, 59, 58, 0);
    const times = [base, base + 1, base + 9, base + 10, base + 99, base + 100, base + 999, base + 1000, base + 1999, base + 2000, base - 1, base, Date.UTC(2027, 0, 1), 0, 1, 999, 1000, Date.now()];
    for (let i = 0; i < 5000; i++) times.push(base + Math.floor(Math.random() * 10_000_000) - 5_000_000);
    for (const t of times) assert.equal(isoNow(t), new Date(t).toISOString(), String(t));
    assert.match(isoNow(), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  });
});
