/**
 * providers.yaml, validated strictly: an unknown or misspelt field is an error, not a silent no-op.
 * Cross-references (a target naming a backend that does not exist, …) are checked in load.ts.
 */
import { z } from 'zod';

const name = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:/-]*$/, 'must be letters, digits and . _ : / - (starting with a letter or digit)');
/** A `models:` key: a name, or a pattern where `*` stands for any run of characters (router/model-routes.ts). */
const modelName = z.string().regex(/^(?:[A-Za-z0-9*][A-Za-z0-9._:/*-]*)$/, 'must be letters, digits and . _ : / - (starting with a letter or digit), or a pattern with *');
const positiveInt = z.int().min(1);
/** A string field that may have been filled from `${VAR}` whose value looked like a number. */
const text = () => z.preprocess((v) => (typeof v === 'number' || typeof v === 'boolean' ? String(v) : v), z.string());
const url = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });

export const serverSchema = z.strictObject({
  host: z.string().min(1).default('127.0.0.1'),
  port: z.int().min(0).max(65535).default(4000),
  /** Largest request body accepted; larger ones get 413. */
  max_body_bytes: positiveInt.default(10 * 1024 * 1024),
  /** On SIGTERM: how long in-flight requests and streams may take to finish. */
  shutdown_grace_ms: z.int().min(0).default(30_000),
  /** Requests served at once by this process; more get 503 + retry-after at once (0 = no limit). */
  max_concurrent_requests: z.int().min(0).default(1024),
  /** Time a client may take to send its request headers, and its whole request. */
  headers_timeout_ms: positiveInt.default(30_000),
  request_timeout_ms: positiveInt.default(120_000),
  /**
   * A client that accepts no more of its stream for this long (it stopped reading) is disconnected,
   * so it cannot hold a connection and a concurrency slot forever; a whole answer must be taken
   * within this plus a second per 64 KiB.
   */
  send_timeout_ms: positiveInt.default(60_000),
  /**
   * Worker processes sharing the listening port (node:cluster); `auto` = one per available core.
   * 1 (default) is a single process with no primary.
   */
  workers: z.union([z.int().min(1).max(256), z.literal('auto')]).default(1),
});

const timeouts = {
  /** Whole non-streaming call, or until the response headers for a stream. */
  timeout_ms: positiveInt.default(600_000),
  /** Longest silence allowed between two chunks of a stream. */
  stream_idle_timeout_ms: positiveInt.default(120_000),
  /** Streams: longest wait for the first content chunk (default: timeout_ms). */
  first_token_timeout_ms: positiveInt.optional(),
};

/** Default `max_response_bytes` of the backends that read upstream bodies themselves. */
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

export const openaiBackendSchema = z.strictObject({
  type: z.literal('openai'),
  base_url: url,
  /** Omit for servers that need no key. Present but empty (e.g. "${OPENAI_API_KEY:-}") marks the backend unconfigured. */
  api_key: text().optional(),
  organization: text().optional(),
  project: text().optional(),
  /** Extra headers sent upstream on every request. */
  headers: z.record(z.string(), text()).optional(),
  /** Upper bound on pooled keep-alive connections to this upstream. */
  max_connections: positiveInt.default(256),
  /** Largest upstream response body read (a non-streamed answer, or one event of a stream); larger is a 502. */
  max_response_bytes: positiveInt.default(DEFAULT_MAX_RESPONSE_BYTES),
  /** This upstream serves POST {base_url}/responses: Responses requests go to it natively (default false: translated). */
  responses: z.boolean().optional(),
  ...timeouts,
});

/** Anthropic Messages API version the `anthropic` backend sends unless `anthropic_version` says otherwise. */
export const DEFAULT_ANTHROPIC_VERSION = '2026-10-21';

export const anthropicBackendSchema = z.strictObject({
  type: z.literal('anthropic'),
  /** Without "/v1" (a trailing "/v1" is tolerated and removed). */
  base_url: url.default('https://api.anthropic.com'),
  /** Empty (e.g. "${ANTHROPIC_API_KEY:-}") marks the backend unconfigured. */
  api_key: text(),
  /** `anthropic-version` header; 2023-06-01 still accepts temperature/top_p, 2026-10-21 (the default) does not. */
  anthropic_version: text()
    .pipe(z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date like 2026-10-21'))
    .optional(),
  /** max_tokens sent when the client sets neither max_tokens nor max_completion_tokens (Anthropic requires one). */
  default_max_tokens: positiveInt.default(4096),
  /** Extra headers sent upstream on every request (e.g. anthropic-beta). */
  headers: z.record(z.string(), text()).optional(),
  /** Upper bound on pooled keep-alive connections to this upstream. */
  max_connections: positiveInt.default(256),
  ...timeouts,
});

export const fakeBackendSchema = z.strictObject({
  type: z.literal('fake'),
  /** Length of the deterministic embedding vectors. */
  embedding_dimensions: positiveInt.max(65536).default(16),
  /** Pause between streamed chunks, to make streaming visible in demos. */
  chunk_delay_ms: z.int().min(0).default(0),
  ...timeouts,
});

/** `type: llamacpp` — llama.cpp's llama-server (a local model server speaking OpenAI at /v1). */
export const llamacppBackendSchema = z.strictObject({
  type: z.literal('llamacpp'),
  /** The server root, e.g. http://127.0.0.1:8080 (a trailing "/v1" is tolerated and removed). */
  base_url: url,
  /** llama-server's --api-key, if it was started with one. Empty means none. */
  api_key: text().optional(),
  /** Upper bound on pooled keep-alive connections to this server. */
  max_connections: positiveInt.default(64),
  /** At start-up: how long to wait for GET /health to answer 200 (the model loading) before giving up. */
  load_timeout_ms: positiveInt.default(600_000),
  /** How often GET /slots (busy slots) and, while not ready, GET /health are polled. */
  slots_poll_ms: positiveInt.default(1_000),
  ...timeouts,
});

/** `type: onnx` — in-process embeddings with ONNX Runtime (a sentence-transformers style export). */
export const onnxBackendSchema = z.strictObject({
  type: z.literal('onnx'),
  /** The .onnx file, e.g. models/minilm/v1/model.onnx; relative paths are from the working directory. */
  model_path: text().pipe(z.string().min(1)),
  /** Hugging Face tokenizer.json (default: tokenizer.json beside model_path). */
  tokenizer_path: text().pipe(z.string().min(1)).optional(),
  /** Which model output to read (default: sentence_embedding, …, last_hidden_state, or the only one). */
  output_name: text().pipe(z.string().min(1)).optional(),
  /** How a token-level output becomes one vector (a pooled output is used as is). */
  pooling: z.enum(['mean', 'cls']).default('mean'),
  /** L2-normalise every vector. */
  normalize: z.boolean().default(true),
  /** Longest input in tokens (special tokens included); longer inputs are truncated. */
  max_length: positiveInt.max(65536).default(512),
  /** ONNX Runtime execution providers, in order of preference (cpu, cuda, tensorrt, …). */
  execution_providers: z.array(z.string().min(1)).min(1).default(['cpu']),
  /** Threads inside one operator / across operators (default: ONNX Runtime's choice). */
  intra_op_threads: positiveInt.optional(),
  inter_op_threads: positiveInt.optional(),
  /** Dynamic batching: concurrent requests wait up to window_ms to share one session.run of up to max_batch_size inputs. */
  batch: z
    .strictObject({ window_ms: z.number().min(0).max(1000).default(2), max_batch_size: positiveInt.max(4096).default(32) })
    .default({ window_ms: 2, max_batch_size: 32 }),
  ...timeouts,
});

export const SUPPORTED_BACKEND_TYPES = ['openai', 'anthropic', 'fake', 'llamacpp', 'onnx'] as const;
/** Types named in the architecture that later versions implement; reported as "not yet supported". */
export const PLANNED_BACKEND_TYPES: readonly string[] = [];

export const backendSchema = z.discriminatedUnion('type', [openaiBackendSchema, anthropicBackendSchema, fakeBackendSchema, llamacppBackendSchema, onnxBackendSchema]);

export const priceSchema = z.strictObject({
  /** USD per 1M input tokens */
  input: z.number().min(0),
  /** USD per 1M output tokens */
  output: z.number().min(0),
});

/** Backends that run on the operator's own hardware: no per-token price. */
const LOCAL_BACKEND_TYPES: ReadonlySet<string> = new Set(['llamacpp', 'onnx']);

/**
 * The price a target gets when its config names none: zero for local backends (so the `cost`
 * policy prefers them until they are busy or down), none (counted as most expensive) otherwise.
 */
export function defaultPrice(backendType: string): z.infer<typeof priceSchema> | undefined {
  return LOCAL_BACKEND_TYPES.has(backendType) ? { input: 0, output: 0 } : undefined;
}

export const targetSchema = z.strictObject({
  backend: z.string().min(1),
  /** The model name sent to the backend. */
  model: text().pipe(z.string().min(1)),
  price: priceSchema.optional(),
  /** `weighted` policy share; 0 drains the target. */
  weight: z.number().min(0).default(1),
  /** Override the backend's timeout_ms for this target. */
  timeout_ms: positiveInt.optional(),
  /** Streams: longest wait for the first content chunk (default: the backend's first_token_timeout_ms, else timeout_ms). */
  first_token_timeout_ms: positiveInt.optional(),
});

export const POLICIES = ['fallback', 'weighted', 'cost', 'latency'] as const;
export const PLANNED_POLICIES: readonly string[] = [];
export type PolicyName = (typeof POLICIES)[number];

export const retrySchema = z.strictObject({
  /** Extra attempts on the same target before failing over (0: fail over at once). */
  max_retries: z.int().min(0).max(10).default(1),
  base_delay_ms: z.int().min(0).default(200),
  max_delay_ms: z.int().min(0).default(5_000),
});

export const breakerSchema = z.strictObject({
  /** Failure share (0–1] in the window that opens the breaker. */
  failure_rate: z.number().gt(0).max(1).default(0.5),
  /** Fewest requests in the window before the rate is trusted. */
  min_requests: positiveInt.default(10),
  /** Sliding window length. */
  window_ms: positiveInt.default(60_000),
  /** Open after this many failures in a row, whatever the window says (0 disables). */
  consecutive_failures: z.int().min(0).default(5),
  /** First open period; doubles on each failed probe up to max_open_ms. */
  open_ms: positiveInt.default(10_000),
  max_open_ms: positiveInt.default(300_000),
});
/** A target's circuit breaker (routing.breaker). */
export type BreakerSettings = z.infer<typeof breakerSchema>;

export const affinitySchema = z.strictObject({
  enabled: z.boolean().default(false),
  /** How long a pin lives after the last answer it steered (match the provider's prompt-cache lifetime). */
  ttl_seconds: positiveInt.default(300),
});

export const routingSchema = z.strictObject({
  /** Bounds the whole attempt chain (all retries and fallbacks) of one request. */
  deadline_ms: positiveInt.default(600_000),
  retry: retrySchema.default(retrySchema.parse({})),
  /** An upstream retry-after longer than this moves on to the next target instead of waiting. */
  max_retry_wait_ms: z.int().min(0).default(10_000),
  breaker: breakerSchema.default(breakerSchema.parse({})),
  /**
   * One breaker and latency score per target across replicas (through state.store) and workers,
   * instead of one per process (docs/operations.md "Shared breakers"). Unset: on in the workers of
   * `server.workers > 1` (one gateway, one breaker), off in a single process.
   */
  shared_health: z.boolean().optional(),
  /** latency policy: chance that a random other target goes first, so recovery is noticed. */
  explore_rate: z.number().min(0).max(1).default(0.05),
  /** latency policy: an estimate older than this counts as unknown (and gets re-measured). */
  stale_ms: positiveInt.default(60_000),
  /** cost policy: output tokens assumed when the request sets no max_tokens. */
  default_max_tokens_estimate: positiveInt.default(1024),
  /** Session affinity: one conversation stays on the target that served it while that target stays healthy. */
  affinity: affinitySchema.default(affinitySchema.parse({})),
});

export const modelSchema = z.strictObject({
  policy: z.string().default('fallback'),
  /** weighted: the same API key always draws the same first target. */
  sticky: z.boolean().default(false),
  /** Override routing.affinity for this model (each field left out is the global one). */
  affinity: z.strictObject({ enabled: z.boolean().optional(), ttl_seconds: positiveInt.optional() }).optional(),
  /** Override routing.deadline_ms for this model. */
  deadline_ms: positiveInt.optional(),
  /** Override routing.retry for this model. */
  retry: retrySchema.optional(),
  targets: z.array(targetSchema).min(1, 'needs at least one target'),
});

export const limitsSchema = z.strictObject({
  /** Requests per minute (GCRA: the whole minute's allowance as a burst, refilled continuously). */
  rpm: positiveInt.optional(),
  /** Tokens per minute: prompt (counted) + max_tokens (reserved), reconciled with the real usage. */
  tpm: positiveInt.optional(),
  /** Requests in flight at once (streams count until they end). */
  max_concurrent: positiveInt.optional(),
  /** USD per budget_period, from actual usage × the serving target's price. */
  budget_usd: z.number().min(0).optional(),
  budget_period: z.enum(['day', 'month']).default('month'),
});

export const keySchema = z.strictObject({
  name,
  /** The key itself (usually "${VAR}"); or key_sha256. Exactly one of the two. */
  key: text().pipe(z.string().min(8, 'must be at least 8 characters')).optional(),
  /** Hex SHA-256 of the key, so the config holds no secret. */
  key_sha256: text()
    .pipe(z.string().regex(/^[0-9a-fA-F]{64}$/, 'must be 64 hex digits (the SHA-256 of the key)'))
    .optional(),
  /** Public model names this key may use (absent: all). */
  models: z.array(z.string().min(1)).min(1).optional(),
  limits: limitsSchema.optional(),
  /** Cache namespace shared by the keys that name it (default: the key's own name). */
  cache_namespace: name.optional(),
});

/** Limits settings that apply to every key. */
export const limitsSettingsSchema = z.strictObject({
  /** Output tokens reserved when a request sets no max_tokens / max_completion_tokens. */
  default_max_tokens: positiveInt.default(1024),
});

export const cacheSchema = z.strictObject({
  enabled: z.boolean().default(false),
  ttl_seconds: positiveInt.default(300),
  /** In-memory store only: most entries kept (least recently used go first). */
  max_entries: positiveInt.default(10_000),
  /** In-memory store only: most bytes kept across all entries. */
  max_bytes: positiveInt.default(64 * 1024 * 1024),
  /** Answers larger than this are not cached (any store). */
  max_entry_bytes: positiveInt.default(1024 * 1024),
  /** Cache answers sampled with temperature > 0 (or no temperature, i.e. the vendor's default of 1). */
  cache_nonzero_temperature: z.boolean().default(false),
  /** per_key: each key (or cache_namespace) sees only its own answers; shared: one namespace for all. */
  namespace: z.enum(['per_key', 'shared']).default('per_key'),
  /** Identical cacheable requests in flight at the same moment share one upstream call. */
  coalesce: z.boolean().default(true),
});

export const stateSchema = z.discriminatedUnion('store', [
  z.strictObject({ store: z.literal('memory') }),
  z.strictObject({
    store: z.literal('redis'),
    url: text().pipe(z.string().regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')),
    /** Prefix of every key the gateway writes. */
    key_prefix: text().default('switchyard:'),
    /** Redis unreachable: open = keep serving with local in-memory limits and cache; closed = 503 for limited keys and no cache. */
    on_unavailable: z.enum(['open', 'closed']).default('open'),
    /** A command slower than this counts as Redis being unavailable. */
    command_timeout_ms: positiveInt.default(500),
  }),
]);

/**
 * Where the gateway keeps its records (keys, teams, the spend ledger, stored responses): an
 * embedded SQLite file by default, or PostgreSQL shared by several replicas.
 */
export const databaseSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('sqlite'),
    /** The file, relative to the config file's folder (default: switchyard.db beside it); `:memory:` keeps nothing. SWITCHYARD_DB overrides it. */
    path: text().pipe(z.string().min(1)).optional(),
  }),
  z.strictObject({
    type: z.literal('postgres'),
    url: text().pipe(z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')),
    /** Connections the gateway opens at most. */
    pool_size: positiveInt.default(10),
    /** A statement slower than this is cancelled by the server. */
    statement_timeout_ms: positiveInt.default(10_000),
  }),
]);

/** The spend ledger: one row per answered request in the database, written behind in batches. */
export const spendSchema = z.strictObject({
  /** Buffered rows are written this often (and at shutdown). */
  flush_ms: positiveInt.default(1000),
  /** A write starts at once when this many rows wait. */
  batch_rows: positiveInt.default(500),
  /** Rows held while the database is unreachable; past it the oldest are dropped (and counted). */
  max_buffered_rows: positiveInt.default(100_000),
  /** Ledger rows older than this are deleted (the daily totals are kept). */
  retention_days: positiveInt.default(90),
});

/** Stored responses of the Responses API (`store` ≠ false; previous_response_id, GET/DELETE /v1/responses/{id}). */
export const responsesSchema = z.strictObject({
  /** Lifetime of a stored response (any store); OpenAI keeps them 30 days. */
  store_ttl_seconds: positiveInt.default(30 * 86_400),
  /** In-memory store (and Redis's local fallback): most bytes across all stored responses (least recently used go first). */
  max_stored_bytes: positiveInt.default(256 * 1024 * 1024),
  /** A stored response (its whole conversation included) larger than this is not stored (any store). */
  max_response_bytes: positiveInt.default(16 * 1024 * 1024),
});

export const loggingSchema = z.strictObject({
  level: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
});

/** OpenTelemetry traces (the standard `OTEL_*` variables win over each setting). */
export const tracingSchema = z.strictObject({
  /** false turns tracing off unless an `OTEL_EXPORTER_OTLP_*ENDPOINT` variable is set */
  enabled: z.boolean().default(true),
  /** the collector's base URL (`/v1/traces` is appended), like OTEL_EXPORTER_OTLP_ENDPOINT */
  endpoint: url.optional(),
  /** the full traces URL, like OTEL_EXPORTER_OTLP_TRACES_ENDPOINT */
  traces_endpoint: url.optional(),
  protocol: z.enum(['http/protobuf', 'http/json']).default('http/protobuf'),
  headers: z.record(z.string(), z.string()).optional(),
  service_name: z.string().min(1).optional(),
  resource_attributes: z.record(z.string(), z.string()).optional(),
  sampler: z.enum(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio']).optional(),
  sampler_arg: z.number().min(0).max(1).optional(),
  /** record prompts and completions (gen_ai.input.messages / gen_ai.output.messages) */
  record_content: z.boolean().default(false),
});

export const configSchema = z.strictObject({
  server: serverSchema.default(serverSchema.parse({})),
  backends: z.record(name, backendSchema),
  models: z.record(modelName, modelSchema),
  keys: z.array(keySchema).optional(),
  limits: limitsSettingsSchema.default(limitsSettingsSchema.parse({})),
  cache: cacheSchema.default(cacheSchema.parse({})),
  state: stateSchema.default({ store: 'memory' }),
  database: databaseSchema.default({ type: 'sqlite' }),
  spend: spendSchema.default(spendSchema.parse({})),
  responses: responsesSchema.default(responsesSchema.parse({})),
  logging: loggingSchema.default(loggingSchema.parse({})),
  telemetry: z.strictObject({ tracing: tracingSchema.optional() }).default({}),
  routing: routingSchema.default(routingSchema.parse({})),
  /** Operator surface: /metrics and /status. */
  admin: z
    .strictObject({
      /** Bearer key for /metrics and /status (required for /status when `keys` is set). */
      key: text().pipe(z.string().min(16, 'must be at least 16 characters')).optional(),
      /** Serve /metrics without the admin key (for a scraper on a private network). */
      public_metrics: z.boolean().default(false),
    })
    .default({ public_metrics: false }),
});

export type Config = z.infer<typeof configSchema>;
export type BackendConfig = z.infer<typeof backendSchema>;
export type TracingConfig = z.infer<typeof tracingSchema>;
export type DatabaseConfig = z.infer<typeof databaseSchema>;
export type OpenAIBackendConfig = z.infer<typeof openaiBackendSchema>;
export type AnthropicBackendConfig = z.infer<typeof anthropicBackendSchema>;
export type FakeBackendConfig = z.infer<typeof fakeBackendSchema>;
export type LlamaCppBackendConfig = z.infer<typeof llamacppBackendSchema>;
export type OnnxBackendConfig = z.infer<typeof onnxBackendSchema>;
export type BackendType = BackendConfig['type'];
export type ModelConfig = z.infer<typeof modelSchema>;
export type TargetConfig = z.infer<typeof targetSchema>;
export type KeyConfig = z.infer<typeof keySchema>;
export type LimitsConfig = z.infer<typeof limitsSchema>;
export type CacheConfig = z.infer<typeof cacheSchema>;
export type StateConfig = z.infer<typeof stateSchema>;
export type ResponsesConfig = z.infer<typeof responsesSchema>;
