/**
 * Watches one llama-server: readiness from GET /health, capacity from GET /slots.
 *
 * - /health answers 200 `{"status":"ok"}` once the model is loaded and 503
 *   `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}` while it loads
 *   (every other route answers that same 503 then). Loading is "not ready", not "broken".
 * - /slots lists the server's parallel slots (`id`, `n_ctx`, `is_processing`, …). It is disabled
 *   by `--no-slots` (501 not_supported_error); capacity then comes from /props `total_slots` and
 *   the requests this gateway has in flight.
 *
 * One poll at a time, every `pollMs`, on an unref()ed timer (so it never keeps the process up),
 * through its own two-connection pool. Between polls the busy count stays fresh by counting the
 * gateway's own requests: busy = (slots busy at the last poll − our requests then) + ours now.
 * That can exceed `total` when requests queue inside llama-server, which is what a least-busy
 * choice needs to see.
 */
import { Agent, request } from 'undici';
import type { Capacity } from '../contract.ts';
import { isLoadingError, type LlamaErrorBody } from './errors.ts';

export type ServerState = 'starting' | 'loading' | 'ready' | 'unreachable' | 'failing';

export interface MonitorOptions {
  backend: string;
  /** server root without a trailing slash, e.g. http://127.0.0.1:8080 */
  root: string;
  apiKey?: string | undefined;
  pollMs: number;
  loadTimeoutMs: number;
  /** state changes, for the log */
  onChange?: (state: ServerState, detail: string) => void;
}

type Probe = { status: number; body: unknown } | { error: string; connection: boolean };

interface SlotsSnapshot {
  total: number;
  busy: number;
  /** this gateway's requests in flight when the snapshot arrived */
  ours: number;
}

const CONNECTION_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** /slots body → total and busy, or undefined when it is not the documented array. */
export function parseSlots(body: unknown): { total: number; busy: number } | undefined {
  if (!Array.isArray(body) || body.length === 0) return undefined;
  let busy = 0;
  for (const s of body) {
    if (!isRecord(s)) return undefined;
    // `is_processing` since 2024; older servers had `state` (0 idle, 1 processing).
    if (s.is_processing === true || (s.is_processing === undefined && typeof s.state === 'number' && s.state !== 0)) busy++;
  }
  return { total: body.length, busy };
}

export class LlamaServerMonitor {
  private _state: ServerState = 'starting';
  private _detail = 'not checked yet';
  private slots: SlotsSnapshot | undefined;
  /** /slots disabled (--no-slots): total from /props, busy from our own requests */
  private slotsDisabled = false;
  private totalFromProps: number | undefined;
  private inflight = 0;
  private started = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly waiters = new Set<() => void>();
  private readonly agent = new Agent({ connections: 2, keepAliveTimeout: 10_000, keepAliveMaxTimeout: 60_000 });
  private readonly headers: Record<string, string>;
  private readonly probeTimeoutMs: number;

  constructor(private readonly opts: MonitorOptions) {
    this.headers = { accept: 'application/json' };
    if (opts.apiKey) this.headers.authorization = `Bearer ${opts.apiKey}`;
    // /slots goes through llama-server's task queue: give it time while a long prompt is processed.
    this.probeTimeoutMs = Math.max(2_000, opts.pollMs * 2);
  }

  get state(): ServerState {
    return this._state;
  }

  get detail(): string {
    return this._detail;
  }

  get ready(): boolean {
    return this._state === 'ready';
  }

  /** Starts polling (idempotent). */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    void this.tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.waiters.clear();
    await this.agent.destroy().catch(() => {});
  }

  /**
   * Resolves once the server is ready; rejects when it is not within `loadTimeoutMs` (polling
   * goes on: see `whenReady`).
   */
  waitUntilReady(timeoutMs = this.opts.loadTimeoutMs): Promise<void> {
    this.start();
    if (this.ready) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(done);
        const what = this._state === 'loading' ? 'was still loading its model' : `did not become ready (${this._detail})`;
        reject(
          new Error(`llama-server backend "${this.opts.backend}" at ${this.opts.root} ${what} after ${timeoutMs} ms; still checking every ${this.opts.pollMs} ms`),
        );
      }, timeoutMs);
      timer.unref();
      this.waiters.add(done);
    });
  }

  /** Resolves whenever the server becomes ready (no time limit). */
  whenReady(): Promise<void> {
    this.start();
    if (this.ready) return Promise.resolve();
    return new Promise<void>((resolve) => this.waiters.add(resolve));
  }

  capacity(): Capacity | undefined {
    if (!this.ready) return undefined;
    if (this.slots) return { total: this.slots.total, busy: Math.max(0, this.slots.busy - this.slots.ours) + this.inflight };
    if (this.totalFromProps !== undefined) return { total: this.totalFromProps, busy: this.inflight };
    return undefined;
  }

  /** Counts a request of ours as in flight; call the returned function (once or more) when it ends. */
  acquire(): () => void {
    this.inflight++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inflight--;
    };
  }

  /** What a request learned: the server answered normally, or said it is loading. */
  observe(outcome: 'served' | 'loading'): void {
    if (outcome === 'served') this.set('ready', 'serving');
    else this.set('loading', 'loading model');
  }

  /** A live GET /health (for health checks); updates the state like a poll does. */
  async checkHealth(): Promise<{ ready: boolean; detail: string }> {
    await this.probeHealth();
    return { ready: this.ready, detail: this._detail };
  }

  private set(state: ServerState, detail: string): void {
    const changed = state !== this._state;
    this._state = state;
    this._detail = detail;
    if (state !== 'ready') this.slots = undefined;
    if (changed) this.opts.onChange?.(state, detail);
    if (state === 'ready' && this.waiters.size > 0) {
      const ws = [...this.waiters];
      this.waiters.clear();
      for (const w of ws) w();
    }
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.poll();
    } catch {
      // a poll never throws on purpose; keep polling whatever happened
    }
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), this.opts.pollMs);
    this.timer.unref();
  }

  private async poll(): Promise<void> {
    if (!this.ready || this.slotsDisabled) {
      await this.probeHealth();
      if (!this.ready || this.slotsDisabled) return;
    }
    const r = await this.get('/slots');
    if (this.stopped) return;
    if ('error' in r) {
      // A slow answer while busy is no sign of trouble; a refused connection is.
      if (r.connection) this.set('unreachable', r.error);
      return;
    }
    const err = isRecord(r.body) && isRecord(r.body.error) ? (r.body.error as LlamaErrorBody) : undefined;
    if (isLoadingError(r.status, err)) return this.set('loading', 'loading model');
    if (r.status === 501 || err?.type === 'not_supported_error') {
      this.slotsDisabled = true;
      this.slots = undefined;
      await this.readProps();
      return;
    }
    const parsed = r.status === 200 ? parseSlots(r.body) : undefined;
    if (parsed) this.slots = { ...parsed, ours: this.inflight };
  }

  private async probeHealth(): Promise<void> {
    const r = await this.get('/health');
    if (this.stopped) return;
    if ('error' in r) return this.set(r.connection ? 'unreachable' : 'failing', r.error);
    const err = isRecord(r.body) && isRecord(r.body.error) ? (r.body.error as LlamaErrorBody) : undefined;
    if (r.status === 200) return this.set('ready', 'ok');
    if (isLoadingError(r.status, err)) return this.set('loading', 'loading model');
    const msg = typeof err?.message === 'string' ? `: ${err.message.slice(0, 200)}` : '';
    this.set('failing', `GET /health answered ${r.status}${msg}`);
  }

  private async readProps(): Promise<void> {
    const r = await this.get('/props');
    if ('error' in r || r.status !== 200 || !isRecord(r.body)) return;
    const n = r.body.total_slots;
    if (typeof n === 'number' && Number.isInteger(n) && n > 0) this.totalFromProps = n;
  }

  private async get(path: string): Promise<Probe> {
    try {
      const res = await request(`${this.opts.root}${path}`, {
        method: 'GET',
        headers: this.headers,
        dispatcher: this.agent,
        headersTimeout: this.probeTimeoutMs,
        bodyTimeout: this.probeTimeoutMs,
      });
      const text = await res.body.text();
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      return { status: res.statusCode, body };
    } catch (err) {
      const e = err as { code?: unknown; cause?: { code?: unknown }; message?: unknown };
      const code = typeof e.code === 'string' ? e.code : typeof e.cause?.code === 'string' ? e.cause.code : typeof e.message === 'string' ? e.message : 'error';
      return { error: code, connection: CONNECTION_ERRORS.has(code) };
    }
  }
}
