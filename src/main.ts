/**
 * Composition root: load config → build deps → serve. SIGTERM/SIGINT drain: /ready turns 503,
 * the listener closes, in-flight requests and streams get `server.shutdown_grace_ms` to finish.
 */
import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import { pathToFileURL } from 'node:url';
import { ConfigError, configPathFrom, isLoopback, loadConfigFile, type LoadedConfig } from './config/load.ts';
import type { GenerationDeps } from './http/deps.ts';
import { answerClientError } from './http/client-error.ts';
import { runPrimary } from './server/cluster/primary.ts';
import { runWorker } from './server/cluster/worker.ts';
import { readConfigForReload } from './server/config-reload.ts';
import { Generations } from './server/generations.ts';
import { watchConfigFile } from './config/watch.ts';
import type { StateStore } from './state/store/contract.ts';
import { createLogger, type Logger } from './telemetry/logger.ts';

/** The package version (package.json sits beside src/ and dist/). */
const VERSION: string = (() => {
  try {
    const pkg: unknown = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    return typeof pkg === 'object' && pkg !== null && 'version' in pkg && typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
})();

export interface RunningServer {
  /** the current configuration generation's dependencies */
  readonly deps: GenerationDeps;
  /** reloads go through here */
  generations: Generations;
  server: Server;
  port: number;
  host: string;
  url: string;
  /** Drains (up to the grace period) and closes; resolves when everything is released. */
  close(graceMs?: number): Promise<void>;
}

export interface ServerOptions {
  logger?: Logger;
  port?: number;
  host?: string;
  /** a cluster worker's `state.store: memory`: the primary's store, over IPC (server/cluster/worker.ts) */
  sharedMemoryStore?: () => StateStore;
}

export async function startServer(loaded: LoadedConfig, opts: ServerOptions = {}): Promise<RunningServer> {
  const logger = opts.logger ?? createLogger(loaded.config.logging.level);
  const generations = new Generations(loaded, logger, VERSION, opts.sharedMemoryStore);
  const deps = generations.deps;
  const host = opts.host ?? deps.config.server.host;
  const port = opts.port ?? deps.config.server.port;
  // Remote backends' SDK imports finish before the listener opens: they are never "loading".
  await generations.prepare();
  // The database is open (and migrated) before the first request can be recorded.
  await generations.openRecords();
  const server = await new Promise<Server>((resolve, reject) => {
    // Node enforces headersTimeout / requestTimeout from a timer that runs every
    // connectionsCheckingInterval (30 s by default): check often enough that the configured values hold.
    const serverOptions = { connectionsCheckingInterval: Math.max(100, Math.min(1000, deps.config.server.headers_timeout_ms)) };
    const s = createServer(serverOptions, generations.listener);
    s.once('error', reject);
    s.listen(port, host, () => resolve(s));
  });
  // Slow or stalled clients cannot hold a socket forever while sending headers or a body.
  server.headersTimeout = deps.config.server.headers_timeout_ms;
  server.requestTimeout = deps.config.server.request_timeout_ms;
  server.keepAliveTimeout = 65_000;
  // What Node's HTTP parser rejects (oversized headers, garbage, a timeout while sending) still
  // gets the error envelope instead of Node's bare status line.
  server.on('clientError', answerClientError);
  const addr = server.address() as AddressInfo;
  // Listen first (liveness works at once), then load local models; /ready turns 200 when all settled.
  // (Remote backends were prepared above; start() reports their failures with the local ones.)
  deps.lifecycle.loading = generations.start();
  const urlHost = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;

  let closing: Promise<void> | undefined;
  const close = (graceMs = generations.deps.config.server.shutdown_grace_ms): Promise<void> => {
    closing ??= (async () => {
      generations.markDraining();
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeIdleConnections();
      const timer = setTimeout(() => server.closeAllConnections(), graceMs);
      await closed;
      clearTimeout(timer);
      await generations.close();
    })();
    return closing;
  };
  return {
    get deps() {
      return generations.deps;
    },
    generations,
    server,
    port: addr.port,
    host: addr.address,
    url: `http://${urlHost}:${addr.port}`,
    close,
  };
}

async function main(): Promise<void> {
  let loaded: LoadedConfig;
  try {
    loaded = loadConfigFile(configPathFrom(process.argv.slice(2), process.env));
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`switchyard: configuration is invalid:\n${err.problems.map((p) => `  ${p}`).join('\n')}\n`);
      process.exit(1);
    }
    throw err;
  }
  const logger = createLogger(loaded.config.logging.level);
  for (const w of loaded.warnings) logger.warn(w, { source: loaded.source });
  const workers = loaded.config.server.workers === 'auto' ? availableParallelism() : loaded.config.server.workers;
  if (workers > 1) {
    // a primary supervising worker processes that share the port (server/cluster/primary.ts)
    runPrimary({ loaded, logger, workers, describe });
    if (!loaded.config.keys && !isLoopback(loaded.config.server.host)) {
      logger.warn('listening beyond loopback without keys: anyone who can reach this port can use the gateway');
    }
    return;
  }
  let running: RunningServer;
  try {
    running = await startServer(loaded, { logger });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    process.stderr.write(`switchyard: cannot listen on ${loaded.config.server.host}:${loaded.config.server.port}: ${e.code ?? e.message}\n`);
    process.exit(1);
  }
  logger.info('listening', { url: running.url, ...describe(loaded) });
  if (!loaded.config.keys && !isLoopback(running.host)) {
    logger.warn('listening beyond loopback without keys: anyone who can reach this port can use the gateway');
  }
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) {
      logger.warn('second signal: exiting now', { signal });
      process.exit(1);
    }
    stopping = true;
    logger.info('draining', { signal, grace_ms: loaded.config.server.shutdown_grace_ms });
    running.close().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  // Hot reload on SIGHUP and when the file changes: validate first, keep the old config on error.
  const reload = (why: string): void => {
    if (stopping) return;
    const next = readConfigForReload(loaded.source, logger, why);
    if (next === undefined) return;
    running.generations.reload(next).then(
      (r) => {
        if (r.ok) {
          loaded = next;
          logger.info('config reloaded', { trigger: why, changed: r.changed.join(', ') || 'nothing' });
          for (const w of r.warnings) logger.warn(w);
        } else {
          logger.error('config reload rejected: keeping the running configuration', { trigger: why, problems: r.problems.join(' | ') });
        }
      },
      (err: unknown) => logger.error('config reload failed: keeping the running configuration', { trigger: why, error: err instanceof Error ? err.message : String(err) }),
    );
  };
  process.on('SIGHUP', () => reload('SIGHUP'));
  watchConfigFile(loaded.source, () => reload('file change'));
}

function describe(loaded: LoadedConfig): Record<string, string> {
  return {
    config: loaded.source,
    models: Object.keys(loaded.config.models).join(','),
    backends: Object.keys(loaded.config.backends).join(','),
    auth: loaded.config.keys ? 'keys' : 'none',
  };
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
// a worker forked by our own primary (not any cluster this process may run under) serves what the primary sends
const workerIndex = cluster.isWorker ? process.env.SWITCHYARD_WORKER : undefined;
if (isMain && workerIndex !== undefined) {
  runWorker({ startServer: (loaded, logger, sharedMemoryStore) => startServer(loaded, { logger, sharedMemoryStore }), createLogger: (loaded) => createLogger(loaded.config.logging.level) }, Number(workerIndex));
} else if (isMain) void main();
