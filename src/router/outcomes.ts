/**
 * How a routing attempt chain ends when nothing served the request: why a target was skipped, the
 * deadline error, the one error that lists every attempt, and the headers-facing bookkeeping
 * (`attempts`, `x-should-retry`) every final error carries.
 */
import { GatewayError } from '../errors/gateway-error.ts';
import type { ResolvedTarget } from './types.ts';

/** One line of the "every attempt" list: which target, and what happened to it. */
export interface AttemptRecord {
  target: string;
  outcome: string;
}

/** Why a target cannot be tried at all right now, or undefined. */
export function skipReason(t: ResolvedTarget): GatewayError | undefined {
  const mk = (message: string, code: 'backend_not_configured' | 'backend_not_ready'): GatewayError => {
    return new GatewayError(code, message, { backend: t.backend });
  };
  if (t.entry.unconfigured) return mk(`backend "${t.backend}" is not configured (its api_key is empty)`, 'backend_not_configured');
  if (t.entry.status === 'loading') return mk(`backend "${t.backend}" is still loading`, 'backend_not_ready');
  // The load error can name server-side paths: it goes to the log and /status, not to clients.
  if (t.entry.status === 'failed') return mk(`backend "${t.backend}" failed to load (see the gateway log)`, 'backend_not_ready');
  return undefined;
}

export function deadlineExceeded(publicModel: string, budget: number, records: AttemptRecord[]): GatewayError {
  const tried = records.length > 0 ? ` Attempts: ${records.map((r) => `${r.target} → ${r.outcome}`).join('; ')}.` : '';
  return new GatewayError('deadline_exceeded', `No target of model '${publicModel}' answered within the request deadline of ${budget} ms.${tried}`);
}

/** The one error for a request that nothing served: lists every attempt, keeps the last status. */
export function exhausted(publicModel: string, records: AttemptRecord[], last: GatewayError | undefined, skips: GatewayError[], soonestMs: number): GatewayError {
  const list = records.map((r) => `${r.target} → ${r.outcome}`).join('; ');
  if (last) {
    return new GatewayError(last.kind, records.length > 1 ? `All targets of model '${publicModel}' failed: ${list}.` : last.message, {
      upstreamStatus: last.status,
      wireCode: last.code,
      param: last.param,
      retryAfter: last.retryAfter,
      cause: last,
      backend: last.backend,
    });
  }
  if (Number.isFinite(soonestMs)) {
    return new GatewayError('circuit_open', `Every target of model '${publicModel}' is unavailable: ${list}.`, {
      retryAfter: Math.max(1, Math.ceil(soonestMs / 1000)),
    });
  }
  const notConfigured = skips.length > 0 && skips.every((s) => s.kind === 'backend_not_configured');
  if (notConfigured) {
    const names = skips.map((s) => `"${s.backend ?? '?'}"`).join(', ');
    return new GatewayError(
      'backend_not_configured',
      `No backend of model '${publicModel}' is configured: ${names} ${skips.length > 1 ? 'have' : 'has'} no API key. Set the key's environment variable and restart the gateway.`,
      { retryAfter: 60 },
    );
  }
  return new GatewayError('backend_not_ready', `No target of model '${publicModel}' can serve right now: ${list}.`, {
    retryAfter: 5,
  });
}

export function finalize(e: GatewayError, attempts: number): GatewayError {
  e.attempts = attempts;
  if (e.status !== 499) e.exhausted = e.status >= 500 || e.status === 429 || e.status === 409;
  return e;
}
