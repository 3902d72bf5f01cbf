/**
 * llama-server's errors → GatewayError. llama-server answers errors as
 * `{"error":{"code":<http status>,"message":"…","type":"…"}}` with types of its own
 * (`not_supported_error` 501, `unavailable_error` 503, `exceed_context_size_error` 400) next to
 * OpenAI's. Those that mean something specific to a local server are named plainly here; the rest
 * take the common upstream mapping (`fromUpstreamStatus`).
 */
import { GatewayError } from '../../errors/gateway-error.ts';
import { fromUpstreamStatus, redact, type UpstreamErrorInfo } from '../../errors/upstream.ts';

export interface LlamaErrorBody {
  code?: unknown;
  message?: unknown;
  type?: unknown;
}

const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** True for llama-server's "still loading the model" answer (503 from every route while it loads). */
export function isLoadingError(status: number | undefined, body: LlamaErrorBody | undefined): boolean {
  return status === 503 && (body?.type === 'unavailable_error' || /loading model/i.test(text(body?.message) ?? ''));
}

export function notReady(backend: string, detail: string, retryAfter = 2): GatewayError {
  return new GatewayError('backend_not_ready', `llama-server backend "${backend}" is not ready: ${detail}.`, { retryAfter, backend });
}

/** What the server must be started with for a route that answered 501, and why. */
function unsupportedMessage(backend: string, upstream: string | undefined): string {
  // "This server does not support embeddings. Start it with `--embeddings`"
  if (/embedding/i.test(upstream ?? '')) {
    return `llama-server backend "${backend}" was started without --embeddings, so it cannot serve embeddings (restart it with --embeddings and a --pooling other than none).`;
  }
  return `llama-server backend "${backend}" does not support this request${upstream ? `: ${upstream}` : ''}.`;
}

/**
 * An HTTP error answer of llama-server. `body` is the `error` object of its body (or undefined when
 * the body was not JSON).
 */
export function fromLlamaStatus(info: UpstreamErrorInfo): GatewayError {
  const { backend, status, secrets } = info;
  const body = info.error as LlamaErrorBody | undefined;
  const upstream = text(body?.message) ? redact(String(body?.message), secrets) : undefined;
  if (isLoadingError(status, body)) return notReady(backend, 'it is still loading its model');
  if (status === 501 || body?.type === 'not_supported_error') {
    // A server-side limitation, not the request's fault: another target may serve it (failover),
    // and when none does the client learns exactly what to change on the server.
    return new GatewayError('backend_unsupported', unsupportedMessage(backend, upstream), { backend });
  }
  // "Pooling type 'none' is not OAI compatible. Please use a different pooling type"
  if (status === 400 && /pooling type 'none'/i.test(upstream ?? '')) return poolingNone(backend);
  if (body?.type === 'exceed_context_size_error') {
    // llama-server's message names both numbers: "request (N tokens) exceeds the available context size (M tokens)…"
    return new GatewayError('context_length_exceeded', upstream ?? `The request exceeds the context size of llama-server backend "${backend}".`, { backend });
  }
  return fromUpstreamStatus({ ...info, error: body ? { message: body.message, type: body.type, code: typeof body.code === 'string' ? body.code : undefined } : undefined });
}

export function poolingNone(backend: string): GatewayError {
  return new GatewayError(
    'backend_unsupported',
    `llama-server backend "${backend}" was started with --pooling none, which gives one vector per token: it cannot serve OpenAI embeddings (restart it with --pooling mean, cls or last).`,
    { backend },
  );
}

/** An error event inside a stream that had already begun (HTTP 200 sent). */
export function llamaStreamError(backend: string, error: unknown, secrets: ReadonlyArray<string>): GatewayError {
  const body = (typeof error === 'object' && error !== null ? error : undefined) as LlamaErrorBody | undefined;
  const raw = typeof error === 'string' ? error : text(body?.message);
  const msg = raw ? redact(raw, secrets) : 'stream error';
  return new GatewayError('upstream_stream_error', `llama-server backend "${backend}" reported an error mid-stream: ${msg}`, { backend });
}
