/**
 * Builds one BaseLLM per configured backend. The switch is exhaustive over the config's backend
 * types: adding a type to the schema without a case here fails to compile.
 */
import type { BackendConfig, Config } from '../config/schema.ts';
import type { Logger } from '../telemetry/logger.ts';
import { AnthropicBackend } from './anthropic.ts';
import type { BaseLLM } from './base-llm.ts';
import { FakeBackend } from './fake.ts';
import { LlamaCppBackend } from './llamacpp.ts';
import { OnnxBackend } from './onnx.ts';
import { OpenAICompatibleBackend } from './openai.ts';

export interface BackendEntry {
  llm: BaseLLM;
  config: BackendConfig;
  /** Configured without its api_key: skipped by the router with a clear error. */
  unconfigured: boolean;
  /** `loading` until the backend's load() settles; `failed` keeps it out of routing. */
  status: 'loading' | 'ready' | 'failed';
  /** why load() failed */
  loadError?: string;
}

export function createBackend(name: string, cfg: BackendConfig, logger?: Logger): BaseLLM {
  switch (cfg.type) {
    case 'openai':
      return new OpenAICompatibleBackend(name, cfg);
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

export class BackendRegistry {
  private readonly entries = new Map<string, BackendEntry>();

  /**
   * With `previous` (a configuration reload), a backend whose configuration did not change keeps
   * its instance — its connection pool, loaded model and load status — instead of being rebuilt.
   */
  constructor(config: Config, unconfigured: ReadonlySet<string>, logger?: Logger, previous?: BackendRegistry) {
    for (const [name, cfg] of Object.entries(config.backends)) {
      const old = previous?.entries.get(name);
      if (old && old.unconfigured === unconfigured.has(name) && JSON.stringify(old.config) === JSON.stringify(cfg)) {
        this.entries.set(name, old);
        this.reused.add(name);
        continue;
      }
      const llm = createBackend(name, cfg, logger);
      this.entries.set(name, { llm, config: cfg, unconfigured: unconfigured.has(name), status: llm.load ? 'loading' : 'ready' });
    }
  }

  /** Names of backends taken over from the previous registry. */
  readonly reused = new Set<string>();

  /** Closes the backends of this registry that `next` did not take over. */
  async closeExcept(next: BackendRegistry): Promise<void> {
    await Promise.allSettled([...this.entries].filter(([name, e]) => next.entries.get(name) !== e).map(([, e]) => e.llm.close?.()));
  }

  /** Backends that are new in this registry and failed to load. */
  newFailures(): Array<{ backend: string; error: string }> {
    return [...this.entries].filter(([name, e]) => !this.reused.has(name) && e.status === 'failed').map(([backend, e]) => ({ backend, error: e.loadError ?? 'unknown error' }));
  }

  /**
   * Runs every backend's load() concurrently. Resolves when all have settled; failures are
   * recorded on the entry (and returned) rather than thrown, so one bad model does not stop the rest.
   */
  async loadAll(): Promise<Array<{ backend: string; error: string }>> {
    const failures: Array<{ backend: string; error: string }> = [];
    await Promise.all(
      [...this.entries].map(async ([name, e]) => {
        if (!e.llm.load || e.status !== 'loading') return;
        try {
          await e.llm.load();
          e.status = 'ready';
        } catch (err) {
          e.status = 'failed';
          e.loadError = err instanceof Error ? err.message : String(err);
          failures.push({ backend: name, error: e.loadError });
          // A backend that keeps trying (a llama-server that comes up late) rejoins when it is ready.
          e.llm.whenReady?.().then(
            () => {
              e.status = 'ready';
              delete e.loadError;
            },
            () => {},
          );
        }
      }),
    );
    return failures;
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
