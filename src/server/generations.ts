/**
 * The running gateway as a sequence of configuration generations. Each generation is a complete
 * GenerationDeps + request listener built from one validated config; the HTTP server hands every new request to the
 * current generation, and a request keeps the generation it started on to its last byte (its
 * handlers close over that generation's deps), so in-flight requests and streams finish on the
 * config they started with.
 *
 * What outlives a reload: the metrics registry, the per-target breakers and latency statistics
 * (HealthState: unchanged targets keep their history), the lifecycle flags, backends whose
 * configuration did not change (their connection pools and loaded models), and the state store and
 * tokenizer when their settings did not change (limits counters, cached answers and stored responses survive).
 * Backends that changed are built and loaded *before* the switch — switching an ONNX model
 * version is a config change, and so is rolling it back — and a reload whose new backends fail to
 * load is rejected, leaving the old generation serving. New remote backends (an SDK to import) are
 * part of that load: a generation never serves with one of them still importing.
 */
import cluster from 'node:cluster';
import type { RequestListener } from 'node:http';
import { OnnxBackend } from '../backends/onnx/backend.ts';
import { BackendRegistry } from '../backends/registry.ts';
import type { LoadedConfig } from '../config/load.ts';
import type { GenerationDeps } from '../http/deps.ts';
import { Operations } from '../gateway/operations.ts';
import { cacheSection, keysSection } from '../http/admin/status-extras.ts';
import { openRecords, type Records } from './records.ts';
import { createListener } from '../http/listener.ts';
import { HealthState } from '../router/health-state.ts';
import { ModelRoutes } from '../router/model-routes.ts';
import { Router, systemClock } from '../router/router.ts';
import { createServices, createStore, storeIdentity, type BuiltServices } from './services.ts';
import type { LimitName, StateStore } from '../state/store/contract.ts';
import type { Logger } from '../telemetry/logger.ts';
import { LabelBounds, Metrics } from '../telemetry/metrics.ts';
import { routerMetrics } from './router-metrics.ts';
import { startTracing, stopTracing, type Tracing } from '../telemetry/tracing.ts';

const LIMIT_LABEL: Record<LimitName, string> = { requests: 'rpm', tokens: 'tpm', concurrency: 'concurrency', budget: 'budget' };

interface Generation {
  deps: GenerationDeps;
  listener: RequestListener;
  services: BuiltServices;
  loaded: LoadedConfig;
}

export type ReloadResult = { ok: true; changed: string[]; warnings: string[] } | { ok: false; problems: string[] };

export class Generations {
  private gen: Generation;
  private readonly metrics = new Metrics();
  private readonly health: HealthState;
  private readonly lifecycle: GenerationDeps['lifecycle'] = { ready: false, draining: false };
  private readonly traffic: GenerationDeps['traffic'] = { inFlight: 0 };
  private readonly records: GenerationDeps['records'] = { database: undefined, ledger: undefined };
  private opened: Records | undefined;
  private readonly startedAt = Date.now();
  /** /status sections that outlive a generation (e.g. the workers' summaries), added to each one's */
  private readonly sections: Record<string, () => unknown> = {};
  private reloading: Promise<ReloadResult> | undefined;

  /**
   * @param sharedMemoryStore in a cluster worker: makes the store `state.store: memory` means there
   *   (the primary's, over IPC)
   */
  constructor(
    loaded: LoadedConfig,
    private readonly logger: Logger,
    private readonly version: string,
    private readonly sharedMemoryStore?: () => StateStore,
  ) {
    // every generation's requests are traced by this one tracer: `telemetry.tracing` changes take effect on restart
    this.tracing = startTracing(loaded.config.telemetry.tracing, logger, version);
    this.health = new HealthState(loaded.config.routing.breaker);
    this.metrics.setBreakerSource(() =>
      this.health
        .snapshot(Date.now())
        .map((s) => ({ backend: s.backend, model: s.model, state: s.state === 'closed' ? 0 : s.state === 'half_open' ? 1 : 2 })),
    );
    this.gen = this.build(loaded);
    this.shareHealth(this.gen);
  }

  private readonly tracing: Tracing | undefined;

  get deps(): GenerationDeps {
    return this.gen.deps;
  }

  /** The server's request listener: every request goes to the generation current when it arrives. */
  readonly listener: RequestListener = (incoming, outgoing) => this.gen.listener(incoming, outgoing);

  /**
   * Finishes what the first generation's remote backends need before they serve (an SDK import);
   * awaited before the server listens, so /health 200 means they answer.
   */
  async prepare(): Promise<void> {
    await this.gen.deps.registry.prepare();
  }

  /**
   * Opens the database (migrating it) and the spend ledger, before the server listens: a database
   * that cannot be opened stops the start with its reason. `database` and `spend` changes take
   * effect on restart.
   */
  async openRecords(): Promise<void> {
    if (this.opened) return;
    this.opened = await openRecords(this.gen.loaded.config, this.logger, this.metrics);
    this.records.database = this.opened.database;
    this.records.ledger = this.opened.ledger;
  }

  /** Loads the first generation's local backends and warms its services; /ready turns 200 after. */
  async start(): Promise<void> {
    const [failures] = await Promise.all([this.gen.deps.registry.loadAll(), this.gen.services.warm()]);
    for (const f of failures) this.logger.error('backend failed to load', { backend: f.backend, error: f.error });
    this.lifecycle.ready = true;
  }

  /**
   * routing.shared_health (unset: on in a cluster worker): breakers through the serving
   * generation's store; every configured target is tracked from the start so a breaker another
   * replica opened is known before this one sends its first request there.
   */
  private shareHealth(gen: Generation): void {
    const { config } = gen.loaded;
    // unset: the workers of one gateway share their breakers; a single process keeps its own
    const shared = config.routing.shared_health ?? cluster.isWorker;
    this.health.share(shared ? gen.services.store : undefined, this.logger);
    if (!shared) return;
    for (const m of Object.values(config.models)) for (const t of m.targets) this.health.get(t.backend, t.model);
  }

  private build(loaded: LoadedConfig, previous?: Generation): Generation {
    const { config } = loaded;
    this.health.configure(config.routing.breaker);
    const registry = new BackendRegistry(config, loaded.unconfiguredBackends, this.logger, previous?.deps.registry);
    const routes = new ModelRoutes(config.models);
    const labels = new LabelBounds(Object.keys(config.models), Object.keys(config.backends), (config.keys ?? []).map((k) => k.name), (n) => routes.keyOf(n));
    const router = new Router(config, registry, this.health, systemClock, Math.random, routerMetrics(this.metrics, labels));
    for (const [name, entry] of registry.all()) {
      if (entry.llm instanceof OnnxBackend) entry.llm.observeBatches((size) => this.metrics.onnxBatchSize.observe({ backend: labels.backend(name) }, size));
    }
    const keepStore = previous && storeIdentity(previous.loaded.config) === storeIdentity(config);
    const services = createServices(
      config,
      this.logger,
      keepStore ? previous.services.store : createStore(config, this.logger, this.sharedMemoryStore),
      (key, limit) => this.metrics.rateLimited.inc({ key: labels.key(key), limit: LIMIT_LABEL[limit] }),
      keepStore ? previous.services.tokens : undefined,
    );
    const deps: GenerationDeps = {
      config,
      registry,
      operations: new Operations(router, services),
      store: services.store,
      responses: services.responses,
      logger: this.logger,
      metrics: this.metrics,
      labels,
      health: this.health,
      version: this.version,
      startedAt: this.startedAt,
      lifecycle: this.lifecycle,
      traffic: this.traffic,
      tracing: this.tracing,
      records: this.records,
      statusExtras: {
        ...this.sections,
        cache: () => cacheSection(this.metrics, config.cache.enabled, { coalesced: () => services.cache?.stats.coalesced, entries: () => services.store.cacheEntries?.() }),
        keys: () => keysSection(config, services.store, Date.now(), (key) => services.limiter.leasesHeld(key)),
      },
    };
    return { deps, listener: createListener(deps), services, loaded };
  }

  /** Adds a /status section to the current generation and every later one. */
  addStatusSection(name: string, section: () => unknown): void {
    this.sections[name] = section;
    (this.gen.deps.statusExtras ??= {})[name] = section;
  }

  /**
   * Validated config in, new generation live (or the old one kept, with the reasons). Concurrent
   * calls share one reload.
   */
  reload(loaded: LoadedConfig): Promise<ReloadResult> {
    this.reloading ??= this.doReload(loaded).finally(() => {
      this.reloading = undefined;
    });
    return this.reloading;
  }

  private async doReload(loaded: LoadedConfig): Promise<ReloadResult> {
    const old = this.gen;
    const next = this.build(loaded, old);
    const [failures] = await Promise.all([next.deps.registry.loadAll(), next.services.warm()]);
    if (failures.length > 0) {
      await next.deps.registry.closeExcept(old.deps.registry);
      await next.services.close({ store: old.services.store, tokens: old.services.tokens });
      return { ok: false, problems: failures.map((f) => `backends.${f.backend}: failed to load: ${f.error}`) };
    }
    this.gen = next;
    this.shareHealth(next);
    const warnings: string[] = [];
    const o = old.loaded.config.server;
    const n = loaded.config.server;
    if (o.host !== n.host || o.port !== n.port) warnings.push('server.host / server.port changes take effect after a restart');
    const same = (k: 'database' | 'spend'): boolean => JSON.stringify(old.loaded.config[k]) === JSON.stringify(loaded.config[k]);
    if (!same('database') || !same('spend')) warnings.push('database / spend changes take effect after a restart');
    // Requests already running on the old generation finish on it; release what it alone owned after
    // they have had the shutdown grace period to do so.
    const grace = Math.max(1000, loaded.config.server.shutdown_grace_ms);
    const keep = { store: next.services.store, tokens: next.services.tokens };
    setTimeout(() => {
      void old.deps.registry.closeExcept(next.deps.registry);
      void old.services.close(keep);
    }, grace).unref();
    return { ok: true, changed: describeChanges(old.loaded, loaded), warnings };
  }

  /** Drains: /ready 503 first; the caller closes the listener; then everything is released. */
  markDraining(): void {
    this.lifecycle.draining = true;
  }

  async close(): Promise<void> {
    this.health.share(undefined);
    await this.gen.deps.registry.close();
    await this.gen.services.close();
    // the requests have finished: their ledger rows are written, then the database closes
    await this.opened?.close();
    this.records.ledger = undefined;
    this.records.database = undefined;
    // spans still batched leave before close resolves
    await stopTracing(this.tracing);
  }
}

function describeChanges(a: LoadedConfig, b: LoadedConfig): string[] {
  const out: string[] = [];
  const sections = new Set([...Object.keys(a.config), ...Object.keys(b.config)]) as Set<keyof LoadedConfig['config']>;
  for (const s of sections) {
    if (s === 'backends' || s === 'models') continue;
    if (JSON.stringify(a.config[s]) !== JSON.stringify(b.config[s])) out.push(s);
  }
  for (const kind of ['backends', 'models'] as const) {
    const x = a.config[kind] as Record<string, unknown>;
    const y = b.config[kind] as Record<string, unknown>;
    for (const k of new Set([...Object.keys(x), ...Object.keys(y)])) {
      if (!(k in x)) out.push(`${kind}.${k} (added)`);
      else if (!(k in y)) out.push(`${kind}.${k} (removed)`);
      else if (JSON.stringify(x[k]) !== JSON.stringify(y[k])) out.push(`${kind}.${k}`);
    }
  }
  return out;
}
