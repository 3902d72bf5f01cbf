/**
 * Builds one BaseLLM per configured backend. The switch is exhaustive over the config's backend
 * types: adding a type to the schema without a case here fails to compile.
 */
import type { BackendConfig, Config } from '../config/schema.ts';
import type { BaseLLM } from './base-llm.ts';
import { FakeBackend } from './fake.ts';
import { OpenAICompatibleBackend } from './openai.ts';

export interface BackendEntry {
  llm: BaseLLM;
  config: BackendConfig;
  /** Configured without its api_key: skipped by the router with a clear error. */
  unconfigured: boolean;
}

export function createBackend(name: string, cfg: BackendConfig): BaseLLM {
  switch (cfg.type) {
    case 'openai':
      return new OpenAICompatibleBackend(name, cfg);
    case 'fake':
      return new FakeBackend(name, cfg);
    default: {
      const never: never = cfg;
      throw new Error(`unhandled backend type ${JSON.stringify(never)}`);
    }
  }
}

export class BackendRegistry {
  private readonly entries = new Map<string, BackendEntry>();

  constructor(config: Config, unconfigured: ReadonlySet<string>) {
    for (const [name, cfg] of Object.entries(config.backends)) {
      this.entries.set(name, { llm: createBackend(name, cfg), config: cfg, unconfigured: unconfigured.has(name) });
    }
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
