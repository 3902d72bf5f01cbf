/**
 * What a non-2xx answer, or a body in an unexpected content coding, from an OpenAI-compatible
 * upstream means: the error to throw. Shared by the JSON calls (backends/upstream/client.ts) and the stream
 * call (backends/upstream/stream-call.ts).
 */
import type { GatewayError } from '../../errors/gateway-error.ts';
import type { UpstreamClientOptions, StatusErrorInfo } from './types.ts';
import { fromUpstreamStatus, retryAfterSeconds, upstreamMalformed } from '../../errors/upstream.ts';

/** Largest error body read (the rest is discarded). */
export const MAX_ERROR_BYTES = 1024 * 1024;

/** A content coding other than identity → the error (bodies are asked for with `accept-encoding: identity`). */
export function encodingError(backend: string, enc: string | undefined): GatewayError | undefined {
  if (enc === undefined || enc.trim() === '' || enc.trim().toLowerCase() === 'identity') return undefined;
  return upstreamMalformed(backend, `a body in content-encoding "${enc.slice(0, 50)}" although identity was asked`);
}

/** A non-2xx answer (its status, headers and the first MAX_ERROR_BYTES of its body) → the error to throw. */
export function statusErrorOf(o: UpstreamClientOptions, status: number, header: (name: string) => string | undefined, text: string): GatewayError {
  let parsed: unknown;
  let isJson = false;
  try {
    parsed = JSON.parse(text);
    isJson = true;
  } catch {
    // not JSON: the text itself is all there is
  }
  const inner = isJson && typeof parsed === 'object' && parsed !== null ? (parsed as { error?: unknown }).error : undefined;
  const error =
    typeof inner === 'object' && inner !== null && !Array.isArray(inner)
      ? (inner as StatusErrorInfo['error'])
      : typeof inner === 'string' && inner !== ''
        ? { message: inner }
        : undefined;
  const info: StatusErrorInfo = {
    backend: o.backend,
    status,
    error,
    retryAfter: retryAfterSeconds(header),
    secrets: o.secrets,
    bodyText: isJson || text.trim() === '' ? undefined : text.trim(),
  };
  return (o.statusError ?? fromUpstreamStatus)(info);
}
