import type { BackendRegistry } from './backends/registry.ts';
import type { Config } from './config/schema.ts';
import type { Gateway } from './gateway.ts';
import type { Logger } from './telemetry/logger.ts';

/** Everything the app needs, built once by main.ts (or a test). */
export interface Deps {
  config: Config;
  gateway: Gateway;
  registry: BackendRegistry;
  logger: Logger;
  /** epoch ms */
  startedAt: number;
  /** ready: every backend's load() has settled; loading: that promise (tests await it). */
  lifecycle: { ready: boolean; draining: boolean; loading?: Promise<void> };
}
