/**
 * A cluster worker (server.workers > 1): serves requests exactly as the single process does, with
 * the configuration the primary validated and sends it, the memory store held by the primary
 * (state/store/ipc.ts), and /metrics summed over every worker by the primary (cluster/metrics.ts). It
 * drains on SIGTERM/SIGINT as the single process does and exits 0; SIGHUP is the primary's (it
 * sends the new configuration). A worker whose primary is gone exits (node:cluster's own rule).
 */
import type { LoadedConfig } from '../../config/load.ts';
import type { Config } from '../../config/schema.ts';
import { IpcStore, type StateOp } from '../../state/store/ipc.ts';
import type { StateStore } from '../../state/store/contract.ts';
import { LeaderNotices } from '../../state/flights/flight-notices.ts';
import type { LogFields, Logger } from '../../telemetry/logger.ts';
import type { Metrics } from '../../telemetry/metrics.ts';
import { localMetrics } from './metrics.ts';
import { workerSummary, type WorkerSummary } from './status.ts';
import { Rpc } from './rpc.ts';
import type { ReloadResult, Generations } from '../generations.ts';

/** What the worker needs of a started server (main.ts's RunningServer). */
export interface WorkerServer {
  generations: Generations;
  readonly deps: { metrics: Metrics; config: Config };
  close(): Promise<void>;
}

export interface WorkerStart {
  /**
   * Starts the HTTP server (main.ts's startServer, listening on the port the workers share), its
   * `state.store: memory` the store `sharedMemoryStore` makes.
   */
  startServer(loaded: LoadedConfig, logger: Logger, sharedMemoryStore: () => StateStore): Promise<WorkerServer>;
  createLogger(loaded: LoadedConfig): Logger;
}

/** Every line of this worker's logger carries `worker: <index>`. */
function tagged(base: Logger, worker: number): Logger {
  const add = (f: LogFields | undefined): LogFields => (f ? { ...f, worker } : { worker });
  return {
    get level() {
      return base.level;
    },
    set level(l) {
      base.level = l;
    },
    debug: (m, f) => base.debug(m, add(f)),
    info: (m, f) => base.info(m, add(f)),
    warn: (m, f) => base.warn(m, add(f)),
    error: (m, f) => base.error(m, add(f)),
  };
}

export function runWorker(start: WorkerStart, index: number): void {
  let running: WorkerServer | undefined;
  let logger: Logger | undefined;
  let stopping = false;

  // the flights this worker leads, told by the primary when a follower attaches (every generation's store)
  const notices = new LeaderNotices();
  const rpc = new Rpc(
    (m, onError) => {
      if (!process.send) throw new Error('no IPC channel to the primary');
      process.send(m, undefined, undefined, (err: Error | null) => {
        if (err) onError(err);
      });
    },
    {
      reload: async (payload): Promise<ReloadResult> => {
        if (!running) return { ok: false, problems: ['worker not started yet'] };
        return running.generations.reload(payload as LoadedConfig);
      },
      localMetrics: async () => (running ? localMetrics(running.deps.metrics.registry) : []),
      localStatus: async (): Promise<WorkerSummary | undefined> => (running ? workerSummary(index, running.generations.deps, Date.now()) : undefined),
      flightFollowed: (id) => notices.heard(String(id)),
    },
  );
  process.on('message', (m: unknown) => rpc.receive(m));
  process.on('disconnect', () => rpc.closed('the primary is gone'));
  // `state.store: memory` in a worker: the primary's store (state/store/ipc.ts)
  const sharedMemoryStore = (): StateStore => new IpcStore((o: StateOp) => rpc.call('state', o), notices);

  // The first configuration is asked for (a message sent before this module had loaded would be lost):
  // listen, then tell the primary; a worker that cannot listen exits 1 (the primary decides what follows).
  void (async () => {
    const loaded = (await rpc.call('config')) as LoadedConfig;
    logger = tagged(start.createLogger(loaded), index);
    try {
      running = await start.startServer(loaded, logger, sharedMemoryStore);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      logger.error('worker failed to start', { error: `cannot listen on ${loaded.config.server.host}:${loaded.config.server.port}: ${e.code ?? e.message}` });
      process.exit(1);
    }
    running.deps.metrics.renderWith(async () => (await rpc.call('metrics', undefined, 10_000)) as { contentType: string; body: string });
    running.generations.addStatusSection('workers', async () => (await rpc.call('status', undefined, 10_000)) as WorkerSummary[]);
    await rpc.call('listening', process.pid);
  })().catch(() => process.exit(1));

  const stop = (signal: string): void => {
    // the primary forwards the signal the terminal may also have sent: one drain either way
    if (stopping) return;
    stopping = true;
    if (!running) process.exit(0);
    logger?.info('draining', { signal, grace_ms: running.deps.config.server.shutdown_grace_ms });
    running.close().then(
      () => {
        logger?.info('stopped');
        process.exit(0);
      },
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // reloads come from the primary; a SIGHUP sent to a worker alone must not end it
  process.on('SIGHUP', () => logger?.warn('SIGHUP goes to the primary (it reloads every worker); ignored by a worker'));
}
