import type { BackendRegistry } from '../backends/registry.ts';
import type { Config } from '../config/schema.ts';
import type { Operations } from '../gateway/operations.ts';
import type { ResponsesStore } from '../gateway/responses-store.ts';
import type { StateStore } from '../state/store/contract.ts';
import type { HealthState } from '../router/health-state.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { LabelBounds, Metrics } from '../telemetry/metrics.ts';
import type { Tracing } from '../telemetry/tracing.ts';
import type { OpenedDatabase } from '../db/database.ts';
import type { SpendLedger } from '../db/ledger.ts';

/** The gateway's records (server/records.ts), open once the server started; they outlive config reloads. */
export interface RecordsView {
  database: OpenedDatabase | undefined;
  /** every answered request is recorded here (access-log.ts) */
  ledger: SpendLedger | undefined;
}

/** Everything one configuration generation's app needs, built by server/generations.ts (a reload builds a new one). */
export interface GenerationDeps {
  config: Config;
  operations: Operations;
  registry: BackendRegistry;
  logger: Logger;
  metrics: Metrics;
  /** per-target breakers and latency statistics (outlives config reloads) */
  health: HealthState;
  /** package version, for /status */
  version: string;
  /** sections other subsystems add to /status (cache, limits, state store) */
  statusExtras?: Record<string, () => unknown>;
  /** limits and cache state (memory or redis); absent only in tests that build deps by hand */
  store?: StateStore | undefined;
  /** stored responses of the Responses API (previous_response_id, GET/DELETE /v1/responses/{id}) */
  responses: ResponsesStore;
  /** maps label values onto configured names (bounded cardinality) */
  labels: LabelBounds;
  /** epoch ms */
  startedAt: number;
  /** ready: every backend's load() has settled; loading: that promise (tests await it). */
  lifecycle: { ready: boolean; draining: boolean; loading?: Promise<void> };
  /** API requests being served now (counted by the access log; outlives config reloads). */
  traffic: { inFlight: number };
  /** the gateway's tracer while tracing is on (outlives config reloads): each API request's trace starts here */
  tracing?: Tracing | undefined;
  records: RecordsView;
}
