/**
 * Composition root: load config → build deps → serve. SIGTERM/SIGINT drain: /ready turns 503,
 * the listener closes, in-flight requests and streams get `server.shutdown_grace_ms` to finish.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { Server } from 'node:http';
import { pathToFileURL } from 'node:url';
import { createApp } from './app.ts';
import { BackendRegistry } from './backends/registry.ts';
import { ConfigError, configPathFrom, isLoopback, loadConfigFile, type LoadedConfig } from './config/load.ts';
import type { Deps } from './deps.ts';
import { Gateway } from './gateway.ts';
import { HealthState } from './router/health-state.ts';
import { Router, systemClock } from './router/router.ts';
import { createServices } from './services.ts';
import type { LimitName } from './state/store.ts';
import { LabelBounds, Metrics, routerMetrics } from './telemetry/metrics.ts';
import { createLogger, type Logger } from './telemetry/logger.ts';

const LIMIT_LABEL: Record<LimitName, string> = { requests: 'rpm', tokens: 'tpm', concurrency: 'concurrency', budget: 'budget' };

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
  deps: Deps;
  server: Server;
  port: number;
  host: string;
  url: string;
  /** Drains (up to the grace period) and closes; resolves when everything is released. */
  close(graceMs?: number): Promise<void>;
}

export function buildDeps(loaded: LoadedConfig, logger?: Logger): Deps {
  const { config } = loaded;
  const log = logger ?? createLogger(config.logging.level);
  const registry = new BackendRegistry(config, loaded.unconfiguredBackends, log);
  const metrics = new Metrics();
  const labels = new LabelBounds(Object.keys(config.models), Object.keys(config.backends), (config.keys ?? []).map((k) => k.name));
  const health = new HealthState(config.routing.breaker);
  metrics.setBreakerSource(() =>
    health.snapshot(Date.now()).map((s) => ({ backend: s.backend, model: s.model, state: s.state === 'closed' ? 0 : s.state === 'half_open' ? 1 : 2 })),
  );
  const router = new Router(config, registry, health, systemClock, Math.random, routerMetrics(metrics, labels));
  const services = createServices(config, log, (key, limit) => metrics.rateLimited.inc({ key: labels.key(key), limit: LIMIT_LABEL[limit] }));
  return {
    config,
    registry,
    gateway: new Gateway(router, services),
    store: services.store,
    logger: log,
    metrics,
    labels,
    health,
    version: VERSION,
    startedAt: Date.now(),
    lifecycle: { ready: false, draining: false },
  };
}

export async function startServer(loaded: LoadedConfig, opts: { logger?: Logger; port?: number; host?: string } = {}): Promise<RunningServer> {
  const deps = buildDeps(loaded, opts.logger);
  const app = createApp(deps);
  const host = opts.host ?? deps.config.server.host;
  const port = opts.port ?? deps.config.server.port;
  const server = await new Promise<Server>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port, hostname: host }, () => resolve(s as Server)) as Server;
    s.once('error', reject);
  });
  // Slow or stalled clients cannot hold a socket forever while sending headers or a body.
  server.headersTimeout = deps.config.server.headers_timeout_ms;
  server.requestTimeout = deps.config.server.request_timeout_ms;
  server.keepAliveTimeout = 65_000;
  // What Node's HTTP parser rejects (oversized headers, garbage, a timeout while sending) still
  // gets the OpenAI error envelope instead of Node's bare status line.
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (!socket.writable || (err.code === 'ECONNRESET' && socket.destroyed)) return socket.destroy();
    const [status, message] =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request headers are too large.']
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'The request was not received in time.']
          : [400, 'The request could not be parsed as HTTP/1.1.'];
    const body = JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code: status === 431 ? 'headers_too_large' : status === 408 ? 'request_timeout' : 'bad_request' } });
    socket.end(`HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  });
  const addr = server.address() as AddressInfo;
  // Listen first (liveness works at once), then load local models; /ready turns 200 when all settled.
  deps.lifecycle.loading = Promise.all([deps.registry.loadAll(), deps.gateway.warm()]).then(([failures]) => {
    for (const f of failures) deps.logger.error('backend failed to load', { backend: f.backend, error: f.error });
    deps.lifecycle.ready = true;
  });
  const urlHost = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;

  let closing: Promise<void> | undefined;
  const close = (graceMs = deps.config.server.shutdown_grace_ms): Promise<void> => {
    closing ??= (async () => {
      deps.lifecycle.draining = true;
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeIdleConnections();
      const timer = setTimeout(() => server.closeAllConnections(), graceMs);
      await closed;
      clearTimeout(timer);
      await deps.registry.close();
      await deps.gateway.close();
    })();
    return closing;
  };
  return { deps, server, port: addr.port, host: addr.address, url: `http://${urlHost}:${addr.port}`, close };
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
  let running: RunningServer;
  try {
    running = await startServer(loaded, { logger });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    process.stderr.write(`switchyard: cannot listen on ${loaded.config.server.host}:${loaded.config.server.port}: ${e.code ?? e.message}\n`);
    process.exit(1);
  }
  logger.info('listening', {
    url: running.url,
    config: loaded.source,
    models: Object.keys(loaded.config.models).join(','),
    backends: Object.keys(loaded.config.backends).join(','),
    auth: loaded.config.keys ? 'keys' : 'none',
  });
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
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
if (isMain) void main();
