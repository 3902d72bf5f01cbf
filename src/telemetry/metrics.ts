/**
 * Prometheus metrics on the gateway's own prom-client Registry (plus Node's default process
 * metrics). Label values are bounded: only names from providers.yaml appear; anything else (an
 * unknown model a client asked for, a route nobody configured) becomes "other".
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { CounterCells, HistogramCells } from './cells.ts';

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const OVERHEAD_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];
/** The OpenTelemetry GenAI semantic conventions' advice for `gen_ai.client.token.usage`. */
const GENAI_TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];
/** The conventions' advice for `gen_ai.client.operation.duration` (seconds). */
const GENAI_DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];

/** `gen_ai.provider.name` of each backend type (local ones and the fake get names of their own; traces name them alike). */
export const GENAI_PROVIDER: Readonly<Record<string, string>> = Object.freeze({
  openai: 'openai',
  anthropic: 'anthropic',
  llamacpp: 'llama_cpp',
  onnx: 'onnx_runtime',
  fake: 'switchyard.fake',
});

/** `gen_ai.operation.name` of an API route's pattern; undefined for routes that are no GenAI operation. */
export function genAiOperation(route: string): string | undefined {
  switch (route) {
    case '/v1/chat/completions':
    case '/v1/messages':
    case '/v1/responses':
      return 'chat';
    case '/v1/completions':
      return 'text_completion';
    case '/v1/embeddings':
      return 'embeddings';
    default:
      return undefined;
  }
}

type GenAiLabels = 'gen_ai_operation_name' | 'gen_ai_provider_name' | 'gen_ai_request_model';

export interface BreakerReading {
  backend: string;
  model: string;
  /** 0 closed, 1 half-open, 2 open */
  state: number;
}

export class Metrics {
  readonly registry = new Registry();
  // the metrics requests update: cells.ts
  readonly requests: CounterCells<'route' | 'model' | 'backend' | 'status_class' | 'cache'>;
  readonly requestDuration: HistogramCells<'route' | 'model'>;
  readonly ttft: HistogramCells<'model' | 'backend'>;
  readonly upstreamDuration: HistogramCells<'backend'>;
  readonly overhead: HistogramCells<'route'>;
  readonly tokens: CounterCells<'model' | 'backend' | 'direction'>;
  readonly cost: CounterCells<'model' | 'backend' | 'key'>;
  readonly unpricedRequests: CounterCells<'model' | 'backend'>;
  readonly attempts: CounterCells<'backend' | 'outcome'>;
  readonly retries: CounterCells<'model' | 'backend'>;
  readonly failovers: CounterCells<'model' | 'from_backend'>;
  readonly breakerState: Gauge<'backend' | 'model'>;
  readonly rateLimited: Counter<'key' | 'limit'>;
  /** GenAI semantic conventions: tokens per upstream operation, by `gen_ai_token_type` (input, output) */
  readonly genAiTokens: HistogramCells<GenAiLabels | 'gen_ai_token_type'>;
  /** GenAI semantic conventions: duration of each operation a backend served or failed; `error_type` empty on success */
  readonly genAiDuration: HistogramCells<GenAiLabels | 'error_type'>;
  readonly inFlight: Gauge<'route'>;
  /**
   * The gauge's figures: requests in flight by route, counted in a plain record and handed to the
   * gauge when it is scraped (a labelled `inc`/`dec` per request hashed its labels twice on the way
   * to the upstream call and back).
   */
  private readonly inFlightByRoute: Record<string, number> = Object.create(null) as Record<string, number>;
  readonly onnxBatchSize: Histogram<'backend'>;
  /** spend ledger rows dropped because the database stayed unreachable past the buffer's bound */
  readonly ledgerDropped: Counter;
  /** spend ledger flushes that failed (their rows kept for the next one) */
  readonly ledgerFlushFailures: Counter;
  /** spend ledger rows waiting to be written */
  readonly ledgerBuffered: Gauge;
  private ledgerSource: () => number = () => 0;
  private breakerSource: () => BreakerReading[] = () => [];

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'switchyard_' });
    this.requests = new CounterCells({
      name: 'switchyard_requests_total',
      help: 'Requests answered, by route, public model, serving backend, status class and cache result.',
      labelNames: ['route', 'model', 'backend', 'status_class', 'cache'],
      registers,
    });
    this.requestDuration = new HistogramCells({
      name: 'switchyard_request_duration_seconds',
      help: 'Time from request received to response finished (streams: to the last byte).',
      labelNames: ['route', 'model'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.ttft = new HistogramCells({
      name: 'switchyard_time_to_first_token_seconds',
      help: 'Streams: time from request received to the first content chunk sent.',
      labelNames: ['model', 'backend'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.upstreamDuration = new HistogramCells({
      name: 'switchyard_upstream_duration_seconds',
      help: 'Duration of each upstream attempt (streams: to the commit point).',
      labelNames: ['backend'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.overhead = new HistogramCells({
      name: 'switchyard_gateway_overhead_seconds',
      help: 'Time spent in the gateway outside upstream calls (non-streaming requests).',
      labelNames: ['route'],
      buckets: OVERHEAD_BUCKETS,
      registers,
    });
    this.tokens = new CounterCells({
      name: 'switchyard_tokens_total',
      help: 'Tokens reported by upstreams, by direction (in = prompt, out = completion).',
      labelNames: ['model', 'backend', 'direction'],
      registers,
    });
    this.cost = new CounterCells({
      name: 'switchyard_cost_usd_total',
      help: 'Spend in USD computed from configured prices and actual usage.',
      labelNames: ['model', 'backend', 'key'],
      registers,
    });
    this.unpricedRequests = new CounterCells({
      name: 'switchyard_unpriced_requests_total',
      help: 'Requests served by a target without a price: their cost is unknown, not zero.',
      labelNames: ['model', 'backend'],
      registers,
    });
    this.attempts = new CounterCells({
      name: 'switchyard_upstream_attempts_total',
      help: 'Upstream attempts by outcome (success, retryable, fatal, timeout, client_closed).',
      labelNames: ['backend', 'outcome'],
      registers,
    });
    this.retries = new CounterCells({
      name: 'switchyard_retries_total',
      help: 'Retries of the same target after a transient failure.',
      labelNames: ['model', 'backend'],
      registers,
    });
    this.failovers = new CounterCells({
      name: 'switchyard_failovers_total',
      help: 'Moves from a failed (or skipped) target to the next one.',
      labelNames: ['model', 'from_backend'],
      registers,
    });
    const source = (): BreakerReading[] => this.breakerSource();
    this.breakerState = new Gauge({
      name: 'switchyard_circuit_breaker_state',
      help: 'Circuit breaker state per target: 0 closed, 1 half-open, 2 open.',
      labelNames: ['backend', 'model'],
      registers,
      collect() {
        this.reset();
        for (const r of source()) this.set({ backend: r.backend, model: r.model }, r.state);
      },
    });
    this.rateLimited = new Counter({
      name: 'switchyard_rate_limited_total',
      help: 'Requests refused by a per-key limit, by key name and limit (rpm, tpm, concurrency, budget).',
      labelNames: ['key', 'limit'],
      registers,
    });
    this.genAiTokens = new HistogramCells({
      name: 'gen_ai_client_token_usage',
      help: 'GenAI client token usage (OpenTelemetry semantic conventions): tokens per operation, input and output.',
      labelNames: ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model', 'gen_ai_token_type'],
      buckets: GENAI_TOKEN_BUCKETS,
      registers,
    });
    this.genAiDuration = new HistogramCells({
      name: 'gen_ai_client_operation_duration_seconds',
      help: 'GenAI client operation duration (OpenTelemetry semantic conventions), seconds; error_type is set when it failed.',
      labelNames: ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model', 'error_type'],
      buckets: GENAI_DURATION_BUCKETS,
      registers,
    });
    const inFlightByRoute = this.inFlightByRoute;
    this.inFlight = new Gauge({
      name: 'switchyard_in_flight_requests',
      help: 'Requests being served right now (streams until their last byte).',
      labelNames: ['route'],
      registers,
      collect() {
        for (const route in inFlightByRoute) this.set({ route }, inFlightByRoute[route] as number);
      },
    });
    this.onnxBatchSize = new Histogram({
      name: 'switchyard_onnx_batch_size',
      help: 'Inputs per ONNX Runtime session.run (dynamic batching).',
      labelNames: ['backend'],
      buckets: [1, 2, 4, 8, 16, 32, 64, 128],
      registers,
    });
    this.ledgerDropped = new Counter({
      name: 'switchyard_ledger_rows_dropped_total',
      help: 'Spend ledger rows dropped: the database stayed unreachable past the buffer bound (spend.max_buffered_rows).',
      registers,
    });
    this.ledgerFlushFailures = new Counter({
      name: 'switchyard_ledger_flush_failures_total',
      help: 'Spend ledger flushes that failed; their rows are kept for the next flush.',
      registers,
    });
    const ledger = (): number => this.ledgerSource();
    this.ledgerBuffered = new Gauge({
      name: 'switchyard_ledger_rows_buffered',
      help: 'Spend ledger rows waiting to be written to the database.',
      registers,
      collect() {
        this.set(ledger());
      },
    });
  }

  /** Where the ledger's buffered-rows gauge reads its value at scrape time. */
  setLedgerSource(fn: () => number): void {
    this.ledgerSource = fn;
  }

  /** A request of `route` started being served (the in-flight gauge). */
  enter(route: string): void {
    this.inFlightByRoute[route] = (this.inFlightByRoute[route] ?? 0) + 1;
  }

  /** A request of `route` has finished (its response closed). */
  leave(route: string): void {
    this.inFlightByRoute[route] = (this.inFlightByRoute[route] ?? 1) - 1;
  }

  /** Where the breaker gauge reads its values at scrape time. */
  setBreakerSource(fn: () => BreakerReading[]): void {
    this.breakerSource = fn;
  }

  private renderer: (() => Promise<{ contentType: string; body: string }>) | undefined;

  /** Where render() gets its text instead of this registry (a cluster worker: every worker's, summed). */
  renderWith(fn: () => Promise<{ contentType: string; body: string }>): void {
    this.renderer = fn;
  }

  async render(): Promise<{ contentType: string; body: string }> {
    if (this.renderer) return this.renderer();
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/** Maps free-form values onto the configured names, so label cardinality stays bounded. */
export class LabelBounds {
  private models: ReadonlySet<string>;
  private backends: ReadonlySet<string>;
  private keys: ReadonlySet<string>;

  /**
   * @param modelKey the `models:` key that serves a name (a pattern's key for a name it matched);
   *   without it only configured names are kept
   */
  constructor(
    models: Iterable<string>,
    backends: Iterable<string>,
    keys: Iterable<string>,
    private readonly modelKey?: (name: string) => string | undefined,
  ) {
    this.models = new Set(models);
    this.backends = new Set(backends);
    this.keys = new Set(keys);
  }

  model(v: string | undefined): string {
    if (v === undefined) return 'none';
    if (this.models.has(v)) return v;
    return this.modelKey?.(v) ?? 'other';
  }

  backend(v: string | undefined): string {
    return v === undefined ? 'none' : this.backends.has(v) ? v : 'other';
  }

  key(v: string | undefined): string {
    return v === undefined ? 'anonymous' : this.keys.has(v) ? v : 'other';
  }
}

export const statusClass = (status: number): string => `${Math.floor(status / 100)}xx`;
