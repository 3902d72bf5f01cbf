/**
 * The pipeline's answers as it hands them on: who served them, what they cost, the headers an
 * error carries (gateway/pipeline.ts).
 */
import { GatewayError } from '../errors/gateway-error.ts';
import type { ResolvedTarget, Routed } from '../router/router.ts';
import type { Answer, Served, StreamResult } from './types.ts';

export function withHeaders(err: unknown, headers: Record<string, string> | undefined): unknown {
  if (headers && err instanceof GatewayError) err.headers = { ...headers, ...err.headers };
  return err;
}

/** The target as served from the cache or a shared call: it cost this request nothing. */
export function free(t: ResolvedTarget): ResolvedTarget {
  return { ...t, target: { ...t.target, price: { input: 0, output: 0 } } };
}

/**
 * The target named by a cached entry or another process's flight (`backend`, `model`), else the
 * request's first, as served for free; undefined when the request has no target.
 */
export function servedTarget(targets: readonly ResolvedTarget[], e: { backend: string; model: string }): ResolvedTarget | undefined {
  const t = targets.find((x) => x.backend === e.backend && x.model === e.model) ?? targets[0];
  return t ? free(t) : undefined;
}

/**
 * A routed answer with who served it. Hot path: built field by field, since `{ ...r, served }` takes
 * V8's slow path for a member added after a spread and leaves unstable shapes for every reader.
 */
export function withServed<T>(r: Routed<T>, served: Served): Answer<T> {
  return { result: r.result, target: r.target, attempts: r.attempts, upstreamMs: r.upstreamMs, served };
}

/** A routed stream's answer, its chunks `result` (the routed ones shaped), built as withServed's. */
export function streamAnswer<C>(r: Routed<unknown>, result: AsyncIterable<C>, usage: StreamResult<C>['usage'], served: Served): StreamResult<C> {
  return { result, target: r.target, attempts: r.attempts, upstreamMs: r.upstreamMs, usage, served };
}
