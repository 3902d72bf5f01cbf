/**
 * providers.yaml, validated strictly: an unknown or misspelt field is an error, not a silent no-op.
 * Cross-references (a target naming a backend that does not exist, …) are checked in load.ts.
 */
import { z } from 'zod';

const name = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:/-]*$/, 'must be letters, digits and . _ : / - (starting with a letter or digit)');
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
});

const timeouts = {
  /** Whole non-streaming call, or until the response headers for a stream. */
  timeout_ms: positiveInt.default(600_000),
  /** Longest silence allowed between two chunks of a stream. */
  stream_idle_timeout_ms: positiveInt.default(120_000),
};

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

export const SUPPORTED_BACKEND_TYPES = ['openai', 'fake'] as const;
/** Types named in the architecture that later versions implement; reported as "not yet supported". */
export const PLANNED_BACKEND_TYPES = ['anthropic', 'llamacpp', 'onnx'] as const;

export const backendSchema = z.discriminatedUnion('type', [openaiBackendSchema, fakeBackendSchema]);

export const priceSchema = z.strictObject({
  /** USD per 1M input tokens */
  input: z.number().min(0),
  /** USD per 1M output tokens */
  output: z.number().min(0),
});

export const targetSchema = z.strictObject({
  backend: z.string().min(1),
  /** The model name sent to the backend. */
  model: text().pipe(z.string().min(1)),
  price: priceSchema.optional(),
  weight: z.number().min(0).optional(),
});

export const POLICIES = ['fallback'] as const;
export const PLANNED_POLICIES = ['weighted', 'cost', 'latency'] as const;

export const modelSchema = z.strictObject({
  policy: z.string().default('fallback'),
  targets: z.array(targetSchema).min(1, 'needs at least one target'),
});

export const limitsSchema = z.strictObject({
  rpm: positiveInt.optional(),
  tpm: positiveInt.optional(),
  max_concurrent: positiveInt.optional(),
  budget_usd: z.number().min(0).optional(),
});

export const keySchema = z.strictObject({
  name,
  key: text().pipe(z.string().min(8, 'must be at least 8 characters')),
  limits: limitsSchema.optional(),
});

export const cacheSchema = z.strictObject({
  enabled: z.boolean().default(false),
  ttl_seconds: positiveInt.default(300),
  max_entries: positiveInt.default(10_000),
});

export const stateSchema = z.discriminatedUnion('store', [
  z.strictObject({ store: z.literal('memory') }),
  z.strictObject({ store: z.literal('redis'), url: z.string().regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL') }),
]);

export const loggingSchema = z.strictObject({
  level: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
});

export const configSchema = z.strictObject({
  server: serverSchema.default(serverSchema.parse({})),
  backends: z.record(name, backendSchema),
  models: z.record(name, modelSchema),
  keys: z.array(keySchema).optional(),
  cache: cacheSchema.default(cacheSchema.parse({})),
  state: stateSchema.default({ store: 'memory' }),
  logging: loggingSchema.default(loggingSchema.parse({})),
});

export type Config = z.infer<typeof configSchema>;
export type BackendConfig = z.infer<typeof backendSchema>;
export type OpenAIBackendConfig = z.infer<typeof openaiBackendSchema>;
export type FakeBackendConfig = z.infer<typeof fakeBackendSchema>;
export type BackendType = BackendConfig['type'];
export type ModelConfig = z.infer<typeof modelSchema>;
export type TargetConfig = z.infer<typeof targetSchema>;
export type KeyConfig = z.infer<typeof keySchema>;
