/**
 * How tracing is set up: the settings resolved from the standard `OTEL_*` variables and the
 * `telemetry.tracing` block (the variables win), the sampler, and the exporter wrapper that reports
 * a failing collector once.
 */
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import type { TracingConfig } from '../config/schema.ts';

/** The gateway's logger, as far as tracing needs it. */
export interface Warn {
  warn(msg: string, fields?: Record<string, string | number | boolean | undefined>): void;
  info(msg: string, fields?: Record<string, string | number | boolean | undefined>): void;
}

export type Env = Readonly<Record<string, string | undefined>>;

/** What the tracer was set up with (resolved from the variables and the config block). */
export interface TracingSetup {
  url: string;
  protocol: 'http/protobuf' | 'http/json';
  headers: Record<string, string>;
  serviceName: string | undefined;
  sampler: Sampler;
  recordContent: boolean;
}

const truthy = (v: string | undefined): boolean => v !== undefined && v.trim().toLowerCase() === 'true';
const nonEmpty = (v: string | undefined): string | undefined => (v === undefined || v.trim() === '' ? undefined : v.trim());

/** `OTEL_EXPORTER_OTLP_HEADERS`' names (`k=v,k2=v2`), lower-cased. */
function envHeaderNames(env: Env): Set<string> {
  const names = new Set<string>();
  for (const raw of [env.OTEL_EXPORTER_OTLP_HEADERS, env.OTEL_EXPORTER_OTLP_TRACES_HEADERS]) {
    if (!raw) continue;
    for (const pair of raw.split(',')) {
      const eq = pair.indexOf('=');
      if (eq > 0) names.add(decodeURIComponent(pair.slice(0, eq).trim()).toLowerCase());
    }
  }
  return names;
}

function samplerFrom(name: string | undefined, arg: number | undefined): Sampler {
  const ratio = arg === undefined || !Number.isFinite(arg) || arg < 0 || arg > 1 ? 1 : arg;
  switch ((name ?? 'parentbased_always_on').trim().toLowerCase()) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/**
 * The tracer's settings, or null when tracing is off: `OTEL_SDK_DISABLED=true`, or neither an
 * endpoint variable nor an enabled `telemetry.tracing` block. Each variable wins over its setting.
 */
export function resolveTracing(cfg: TracingConfig | undefined, env: Env = process.env): TracingSetup | null {
  if (truthy(env.OTEL_SDK_DISABLED)) return null;
  const tracesEndpoint = nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  const endpoint = nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT);
  const fromEnv = tracesEndpoint !== undefined || endpoint !== undefined;
  if (!fromEnv && (cfg === undefined || cfg.enabled === false || (cfg.endpoint === undefined && cfg.traces_endpoint === undefined))) return null;
  const base = (b: string): string => `${b.replace(/\/+$/, '')}/v1/traces`;
  const url =
    tracesEndpoint ??
    (endpoint !== undefined ? base(endpoint) : undefined) ??
    cfg?.traces_endpoint ??
    (cfg?.endpoint !== undefined ? base(cfg.endpoint) : 'http://localhost:4318/v1/traces');
  const p = nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) ?? nonEmpty(env.OTEL_EXPORTER_OTLP_PROTOCOL) ?? cfg?.protocol ?? 'http/protobuf';
  const protocol = p === 'http/json' ? 'http/json' : 'http/protobuf';
  // the exporter adds the variables' headers itself; a configured header they also name gives way
  const shadowed = envHeaderNames(env);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(cfg?.headers ?? {})) if (!shadowed.has(k.toLowerCase())) headers[k] = v;
  const argText = nonEmpty(env.OTEL_TRACES_SAMPLER_ARG);
  const arg = argText !== undefined ? Number(argText) : cfg?.sampler_arg;
  return {
    url,
    protocol,
    headers,
    serviceName: nonEmpty(env.OTEL_SERVICE_NAME) ?? cfg?.service_name,
    sampler: samplerFrom(nonEmpty(env.OTEL_TRACES_SAMPLER) ?? cfg?.sampler, arg),
    recordContent: cfg?.record_content ?? false,
  };
}

/**
 * The exporter, reporting a failed export once (not once per batch or span) until an export
 * succeeds again. An export starts in an event-loop turn of its own: the BatchSpanProcessor also
 * exports when its buffer fills, from within the `span.end()` that filled it, and serializing a
 * batch there would delay that request's answer.
 */
export class ReportingExporter implements SpanExporter {
  private failing = false;

  constructor(
    private readonly inner: SpanExporter,
    private readonly logger: Warn,
    private readonly url: string,
  ) {}

  export(spans: ReadableSpan[], done: (r: ExportResult) => void): void {
    setImmediate(() => {
      try {
        this.send(spans, done);
      } catch (err) {
        // a throwing exporter loses its batch, never the process
        done({ code: ExportResultCode.FAILED, error: err instanceof Error ? err : new Error(String(err)) });
      }
    });
  }

  private send(spans: ReadableSpan[], done: (r: ExportResult) => void): void {
    this.inner.export(spans, (r) => {
      if (r.code !== ExportResultCode.SUCCESS) {
        if (!this.failing) {
          this.failing = true;
          this.logger.warn('trace export failed; spans are dropped until the collector answers', { endpoint: this.url, error: r.error?.message ?? 'unknown error' });
        }
      } else if (this.failing) {
        this.failing = false;
        this.logger.info('trace export recovered', { endpoint: this.url });
      }
      done(r);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}
