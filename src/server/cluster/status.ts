/**
 * /status with server.workers > 1: each worker's own summary (what differs between workers: its
 * process, its requests in flight, its readiness, and the breakers it holds that are not closed),
 * gathered by the primary from every worker and shown by whichever worker serves the page, under
 * `extras.workers`.
 */
import type { GenerationDeps } from '../../http/deps.ts';

export interface WorkerSummary {
  /** the worker's index (0 … workers − 1) */
  worker: number;
  pid: number | null;
  /** `serving`, or `draining`; `starting` / `restarting` when the primary has no answer from it */
  state: 'serving' | 'starting' | 'draining' | 'restarting';
  /** times the primary restarted this worker's slot after a crash (consecutive, reset once healthy) */
  restarts: number;
  uptime_s?: number;
  ready?: boolean;
  in_flight?: number;
  /** this worker's breakers that are not closed */
  breakers?: Array<{ backend: string; model: string; state: string; retry_in_ms: number }>;
}

/** This worker's summary, from its current generation. */
export function workerSummary(index: number, deps: GenerationDeps, now: number): WorkerSummary {
  return {
    worker: index,
    pid: process.pid,
    state: deps.lifecycle.draining ? 'draining' : 'serving',
    restarts: 0,
    uptime_s: Math.round((now - deps.startedAt) / 1000),
    ready: deps.lifecycle.ready,
    in_flight: deps.traffic.inFlight,
    breakers: deps.health
      .snapshot(now)
      .filter((b) => b.state !== 'closed')
      .map((b) => ({ backend: b.backend, model: b.model, state: b.state, retry_in_ms: Math.max(0, Math.round(b.retry_in_ms)) })),
  };
}
