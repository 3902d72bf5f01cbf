/**
 * The cluster primary (server.workers > 1): serves no requests itself. It validates the
 * configuration once and hands it to N workers sharing the listening port (node:cluster), holds
 * the one memory store they share (state/store/ipc.ts), sums their metrics (cluster/metrics.ts), and
 * supervises them:
 *  - a worker that dies is replaced after a back-off (100 ms doubling to 10 s; a worker that served
 *    for 30 s starts again from 100 ms); one that dies before listening 5 times in a row ends the
 *    primary with exit code 1 and the reason;
 *  - SIGHUP / a changed file: the new configuration is validated here once and sent to every
 *    worker; each builds and loads it like the single process does. If any worker rejects it (a
 *    backend failed to load there), it is rejected by all: the workers that had applied it are
 *    given the previous configuration again, so every worker serves the same one;
 *  - SIGTERM / SIGINT: every worker drains as the single process does; the primary exits 0 once all
 *    have exited 0. A second signal ends them at once (exit 1).
 */
import cluster, { type Worker } from 'node:cluster';
import type { LoadedConfig } from '../../config/load.ts';
import { readConfigForReload } from '../config-reload.ts';
import { watchConfigFile } from '../../config/watch.ts';
import { FlightTable } from '../../state/flights/flight-table.ts';
import { serveStateOp, type StateOp } from '../../state/store/ipc.ts';
import { MemoryStore } from '../../state/store/memory.ts';
import type { Logger } from '../../telemetry/logger.ts';
import { aggregateMetrics } from './metrics.ts';
import type { WorkerSummary } from './status.ts';
import { Rpc } from './rpc.ts';
import type { ReloadResult } from '../generations.ts';
import { storeIdentity } from '../services.ts';

const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 10_000;
/** A worker that served this long counts as healthy: its next crash backs off from the start. */
const HEALTHY_AFTER_MS = 30_000;
/** Consecutive deaths before listening that end the primary. */
const MAX_START_FAILURES = 5;

interface Slot {
  index: number;
  worker: Worker | undefined;
  rpc: Rpc | undefined;
  listening: boolean;
  listeningSince: number;
  /** consecutive deaths (back-off exponent) */
  crashes: number;
  /** consecutive deaths before listening */
  startFailures: number;
  restart: NodeJS.Timeout | undefined;
}

export interface PrimaryOptions {
  loaded: LoadedConfig;
  logger: Logger;
  workers: number;
  /** printed on the `listening` line */
  describe(loaded: LoadedConfig): Record<string, string>;
}

export function runPrimary(opts: PrimaryOptions): void {
  const { logger } = opts;
  let loaded = opts.loaded;
  let store: MemoryStore | undefined;
  // coalescing across workers: one table of flights for all of them, whatever store generation
  const flights = new FlightTable();
  let announced = false;
  let stopping = false;
  const slots: Slot[] = Array.from({ length: opts.workers }, (_, index) => ({
    index,
    worker: undefined,
    rpc: undefined,
    listening: false,
    listeningSince: 0,
    crashes: 0,
    startFailures: 0,
    restart: undefined,
  }));

  const sharedStore = (): MemoryStore => {
    const c = loaded.config;
    store ??= new MemoryStore({ maxEntries: c.cache.max_entries, maxBytes: c.cache.max_bytes, maxBlobBytes: c.responses.max_stored_bytes });
    return store;
  };
  const live = (): Slot[] => slots.filter((s) => s.listening && s.rpc);

  cluster.setupPrimary({ serialization: 'advanced' });

  const fork = (slot: Slot): void => {
    slot.restart = undefined;
    const worker = cluster.fork({ SWITCHYARD_WORKER: String(slot.index) });
    // a follower attached to a flight this worker leads: told at once, so its leader waits without asking
    const followed = (id: string): void => void rpc.call('flightFollowed', id).catch(() => {});
    const rpc = new Rpc(
      (m, onError) => {
        worker.send(m, undefined, (err: Error | null) => {
          if (err) onError(err);
        });
      },
      {
        config: () => loaded,
        listening: () => {
          if (slot.worker !== worker) return;
          slot.listening = true;
          slot.listeningSince = Date.now();
          slot.startFailures = 0;
          logger.info('worker started', { worker: slot.index, pid: worker.process.pid ?? 0 });
          if (!announced && slots.every((s) => s.listening)) announce();
        },
        state: (o) => serveStateOp(sharedStore(), o as StateOp, flights, followed),
        status: async (): Promise<WorkerSummary[]> =>
          Promise.all(
            slots.map(async (s): Promise<WorkerSummary> => {
              const answer = s.listening ? ((await s.rpc?.call('localStatus', undefined, 5000).catch(() => undefined)) as WorkerSummary | undefined) : undefined;
              return answer ?? { worker: s.index, pid: s.worker?.process.pid ?? null, state: s.worker ? 'starting' : 'restarting', restarts: s.crashes };
            }),
          ).then((list) => list.map((w) => ({ ...w, restarts: slots[w.worker]?.crashes ?? 0 }))),
        metrics: async () => {
          const parts = await Promise.all(live().map((s) => s.rpc?.call('localMetrics', undefined, 5000).catch(() => undefined)));
          return aggregateMetrics(parts.filter((p) => p !== undefined));
        },
      },
    );
    slot.worker = worker;
    slot.rpc = rpc;
    slot.listening = false;
    worker.on('message', (m: unknown) => rpc.receive(m));
    worker.once('exit', (code, signal) => {
      rpc.closed('worker exited');
      const wasListening = slot.listening;
      slot.worker = undefined;
      slot.rpc = undefined;
      slot.listening = false;
      if (stopping) {
        exitCodes.push(code ?? 1);
        if (slots.every((s) => !s.worker)) finish();
        return;
      }
      if (wasListening && Date.now() - slot.listeningSince >= HEALTHY_AFTER_MS) slot.crashes = 0;
      if (!wasListening) slot.startFailures++;
      if (slot.startFailures >= MAX_START_FAILURES) {
        const why = `worker ${slot.index} exited before listening ${MAX_START_FAILURES} times in a row (last: ${signal ?? `exit code ${code}`}); see its log lines above`;
        logger.error('workers cannot start: exiting', { error: why });
        process.stderr.write(`switchyard: ${why}\n`);
        stopping = true;
        for (const s of slots) if (s.worker?.process.pid) process.kill(s.worker.process.pid, 'SIGKILL');
        process.exit(1);
      }
      const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** slot.crashes);
      slot.crashes++;
      logger.error('worker died: starting another', { worker: slot.index, pid: worker.process.pid ?? 0, exit: signal ?? code ?? 'unknown', restart_in_ms: delay });
      slot.restart = setTimeout(() => fork(slot), delay);
    });
  };

  const announce = (): void => {
    announced = true;
    logger.info('listening', { url: listeningUrl ?? '', workers: opts.workers, ...opts.describe(loaded) });
  };

  // the address every worker shares (a port of 0 becomes one port, chosen once, for all of them)
  let listeningUrl: string | undefined;
  cluster.on('listening', (_w, address) => {
    if (listeningUrl !== undefined) return;
    const host = typeof address.address === 'string' && address.address.includes(':') ? `[${address.address}]` : (address.address ?? '127.0.0.1');
    listeningUrl = `http://${host}:${address.port}`;
  });

  const exitCodes: number[] = [];
  const finish = (): void => {
    const ok = exitCodes.every((c) => c === 0);
    logger.info('stopped', { workers: exitCodes.length, ...(ok ? {} : { failed: exitCodes.filter((c) => c !== 0).length }) });
    process.exit(ok ? 0 : 1);
  };

  const stop = (signal: string): void => {
    if (stopping) {
      logger.warn('second signal: exiting now', { signal });
      for (const s of slots) if (s.worker?.process.pid) process.kill(s.worker.process.pid, 'SIGKILL');
      process.exit(1);
    }
    stopping = true;
    logger.info('draining', { signal, grace_ms: loaded.config.server.shutdown_grace_ms, workers: slots.filter((s) => s.worker).length });
    for (const s of slots) {
      if (s.restart) clearTimeout(s.restart);
      s.restart = undefined;
      if (s.worker?.process.pid) process.kill(s.worker.process.pid, 'SIGTERM');
    }
    if (slots.every((s) => !s.worker)) finish();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  let reloading = false;
  const reload = async (why: string): Promise<void> => {
    if (stopping || reloading) return;
    const next = readConfigForReload(loaded.source, logger, why);
    if (next === undefined) return;
    reloading = true;
    try {
      const targets = live();
      const results = await Promise.all(
        targets.map((s) =>
          (s.rpc?.call('reload', next, 300_000) ?? Promise.reject(new Error('worker gone'))).then(
            (r) => r as ReloadResult,
            (err: unknown): ReloadResult => ({ ok: false, problems: [err instanceof Error ? err.message : String(err)] }),
          ),
        ),
      );
      const rejected = results.flatMap((r, i) => (r.ok ? [] : [`worker ${targets[i]?.index}: ${r.problems.join('; ')}`]));
      if (rejected.length > 0) {
        const applied = targets.filter((_, i) => results[i]?.ok);
        logger.error('config reload rejected: keeping the running configuration', {
          trigger: why,
          problems: rejected.join(' | '),
          rejected_by: rejected.length,
          rolled_back: applied.length,
        });
        await Promise.all(applied.map((s) => s.rpc?.call('reload', loaded, 300_000).catch(() => undefined)));
        return;
      }
      if (store && storeIdentity(loaded.config) !== storeIdentity(next.config)) {
        // new bounds or another store: the workers built new stores, so does the primary
        void store.close();
        store = undefined;
      }
      const first = results[0];
      loaded = next;
      logger.info('config reloaded', { trigger: why, workers: targets.length, changed: first?.ok ? first.changed.join(', ') || 'nothing' : 'nothing' });
      if (first?.ok) for (const w of first.warnings) logger.warn(w);
    } finally {
      reloading = false;
    }
  };
  process.on('SIGHUP', () => void reload('SIGHUP'));
  watchConfigFile(loaded.source, () => void reload('file change'));

  for (const s of slots) fork(s);
}
