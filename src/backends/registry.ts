/**
 * Builds one BaseLLM per configured backend. The switches are exhaustive over the config's backend
 * types: adding a type to the schema without a case here fails to compile.
 *
 * Local backends (a model to load, a server to wait for) are `loading` until their load() settles,
 * and /ready says so. Remote API backends are never `loading`: what their load() does (importing a
 * vendor SDK only when such a backend is configured) is finished by prepare(), which the runtime
 * awaits before the server listens and before a reloaded generation serves.
 */
import type { BackendConfig, BackendType, Config } from '../config/schema.ts';
import type { Logger } from '../telemetry/logger.ts';
import { AnthropicBackend } from './anthropic/backend.ts';
import type { BaseLLM } from './contract.ts';
import { FakeBackend } from './fake/backend.ts';
import { LlamaCppBackend } from './llamacpp/backend.ts';
import { OnnxBackend } from './onnx/backend.ts';
import { OpenAIBackend } from './openai/backend.ts';

export interface BackendEntry {
  llm: BaseLLM;
  config: BackendConfig;
  /** Configured without its api_key: skipped by the router with a clear error. */
  unconfigured: boolean;
  /** `loading` until a local backend's load() settles; `failed` keeps it out of routing. */
  status: 'loading' | 'ready' | 'failed';
  /** why load() failed */
  loadError?: string;
}

export function createBackend(name: string, cfg: BackendConfig, logger?: Logger): BaseLLM {
  switch (cfg.type) {
    case 'openai':
      return new OpenAIBackend(name, cfg);
    case 'anthropic':
      return new AnthropicBackend(name, cfg, logger);
    case 'fake':
      return new FakeBackend(name, cfg);
    case 'llamacpp':
      return new LlamaCppBackend(name, cfg, logger);
    case 'onnx':
      return new OnnxBackend(name, cfg, logger);
    default: {
      const never: never = cfg;
      throw new Error(`unhandled backend type ${JSON.stringify(never)}`);
    }
  }
}

/** Whether the type is a remote API (no model of its own to load), as opposed to a local backend. */
export function isRemote(type: BackendType): boolean {
  switch (type) {
    case 'openai':
    case 'anthropic':
      return true;
    case 'fake':
    case 'llamacpp':
    case 'onnx':
      return false;
    default: {
      const never: never = type;
      throw new Error(`unhandled backend type ${JSON.stringify(never)}`);
    }
  }
}

type LoadFailure = { backend: string; error: string };

export class BackendRegistry {
  private readonly entries = new Map<string, BackendEntry>();
  /** New remote backends whose load() is still to run (prepare() or loadAll() runs it). */
  private readonly remote = new Set<string>();
  /** Each backend's load() in this registry, run once however many callers wait for it. */
  private readonly loads = new Map<string, Promise<LoadFailure | undefined>>();

  /**
   * With `previous` (a configuration reload), a backend whose configuration did not change keeps
   * its instance — its connection pool, loaded model and load status — instead of being rebuilt.
   */
  constructor(config: Config, unconfigured: ReadonlySet<string>, logger?: Logger, previous?: BackendRegistry) {
    for (const [name, cfg] of Object.entries(config.backends)) {
      const old = previous?.entries.get(name);
      if (old && old.unconfigured === unconfigured.has(name) && JSON.stringify(old.config) === JSON.stringify(cfg)) {
        this.entries.set(name, old);
        continue;
      }
      const llm = createBackend(name, cfg, logger);
      const remote = isRemote(cfg.type);
      if (remote && llm.load) this.remote.add(name);
      this.entries.set(name, { llm, config: cfg, unconfigured: unconfigured.has(name), status: llm.load && !remote ? 'loading' : 'ready' });
    }
  }

  /** Closes the backends of this registry that `next` did not take over. */
  async closeExcept(next: BackendRegistry): Promise<void> {
    await Promise.allSettled([...this.entries].filter(([name, e]) => next.entries.get(name) !== e).map(([, e]) => e.llm.close?.()));
  }

  /**
   * Runs the load() of the new remote backends (an SDK import): the gateway awaits it before it
   * serves, so a remote backend is ready from the first request. Failures as in loadAll().
   */
  async prepare(): Promise<LoadFailure[]> {
    const results = await Promise.all([...this.remote].map((name) => this.loadOne(name)));
    return results.filter((f) => f !== undefined);
  }

  /**
   * Runs every backend's load() concurrently (remote ones included, once). Resolves when all have
   * settled; failures are recorded on the entry (and returned) rather than thrown, so one bad model
   * does not stop the rest.
   */
  async loadAll(): Promise<LoadFailure[]> {
    const names = [...this.entries].filter(([name, e]) => e.llm.load && (e.status === 'loading' || this.remote.has(name))).map(([n]) => n);
    const results = await Promise.all(names.map((name) => this.loadOne(name)));
    return results.filter((f) => f !== undefined);
  }

  private loadOne(name: string): Promise<LoadFailure | undefined> {
    let p = this.loads.get(name);
    if (!p) {
      p = this.runLoad(name);
      this.loads.set(name, p);
    }
    return p;
  }

  private async runLoad(name: string): Promise<LoadFailure | undefined> {
    const e = this.entries.get(name);
    if (!e?.llm.load) return undefined;
    try {
      await e.llm.load();
      e.status = 'ready';
      return undefined;
    } catch (err) {
      e.status = 'failed';
      e.loadError = err instanceof Error ? err.message : String(err);
      // A backend that keeps trying (a llama-server that comes up late) rejoins when it is ready.
      e.llm.whenReady?.().then(
        () => {
          e.status = 'ready';
          delete e.loadError;
        },
        () => {},
      );
      return { backend: name, error: e.loadError };
    }
  }

  /** True once no backend is still loading. */
  allSettled(): boolean {
    for (const e of this.entries.values()) if (e.status === 'loading') return false;
    return true;
  }

  get(name: string): BackendEntry | undefined {
    return this.entries.get(name);
  }

  all(): IterableIterator<[string, BackendEntry]> {
    return this.entries.entries();
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.entries.values()].map((e) => e.llm.close?.()));
  }
}
