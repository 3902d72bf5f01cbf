/**
 * Session affinity (`routing.affinity`): one conversation stays on the target that served it while
 * that target stays healthy, so the provider's prompt cache keeps hitting.
 *
 * A session is named by, in order: the `x-session-id` header, the body's `prompt_cache_key`, the
 * agent CLIs' own session headers (`x-claude-code-session-id`, Codex's `session-id`/`session_id`),
 * else a hash of the system prompt and the first user message (read from the client's own body, no
 * translation). Legacy completions are pinned by the explicit keys only; embeddings never.
 *
 * The pin — (API key, `models:` entry, session) → the backend and model that last served it — is a
 * StateStore blob (`aff:<sha256>`) with a TTL, so replicas on Redis share it. It is looked up before
 * routing (the router moves that target first: RouteRequest.preferTarget), written after every
 * routed answer (sliding TTL; a failover writes the new target) and deleted when the request fails
 * in a way the router counts against a target (a stream: also when it fails after its commit point).
 * The policy still draws each session's first target, so a weighted split holds across sessions.
 * Store trouble never fails a request: without its pin it is routed as if it had none.
 */
import { createHash } from 'node:crypto';
import type { Config } from '../config/schema.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import type { Operation, ResolvedTarget, Routed, Router } from '../router/router.ts';
import { blamesTarget } from '../router/retry.ts';
import type { StateStore } from '../state/store/contract.ts';

/** What names a session besides the body (request headers, read by http/respond.ts). */
export interface SessionHeaders {
  /** `x-session-id` */
  sessionId?: string | undefined;
  /** `x-claude-code-session-id`, Codex's `session-id` / `session_id` */
  agentSessionId?: string | undefined;
  /** the API key's name: sessions of different keys never share a pin */
  keyName?: string | undefined;
}

export interface Pin {
  /** storage key */
  key: string;
  ttlMs: number;
}

export type Preferred = { backend: string; model: string } | undefined;

type Body = Record<string, unknown>;

export class Affinity {
  /** false: no model has affinity on, and every request skips it at the cost of one check */
  private readonly on: boolean;

  constructor(
    private readonly config: Config,
    private readonly router: Router,
    private readonly store: StateStore | undefined,
  ) {
    const global = config.routing.affinity.enabled;
    this.on = store !== undefined && (global || Object.values(config.models).some((m) => m.affinity?.enabled === true));
  }

  /** The pin of this request's session, or undefined (affinity off for its model, or no session). */
  session(op: Operation, body: Body & { model: string }, h: SessionHeaders): Pin | undefined {
    if (!this.on || op === 'embeddings') return undefined;
    const modelKey = this.router.modelKey(body.model);
    if (modelKey === undefined) return undefined;
    const own = this.config.models[modelKey]?.affinity;
    const global = this.config.routing.affinity;
    if (!(own?.enabled ?? global.enabled)) return undefined;
    const id = sessionId(op, body, h);
    if (id === undefined) return undefined;
    const digest = createHash('sha256').update(`${h.keyName ?? ''}\u0000${modelKey}\u0000${id}`).digest('base64url');
    return { key: `aff:${digest}`, ttlMs: (own?.ttl_seconds ?? global.ttl_seconds) * 1000 };
  }

  /** Routes a JSON answer with its session's pin preferred, then keeps or drops the pin. */
  route<T>(pin: Pin | undefined, run: (prefer: Preferred) => Promise<Routed<T>>): Promise<Routed<T>> {
    // not async: without a session the call is the router's own, no extra promise
    return pin === undefined ? run(undefined) : this.pinned(pin, run);
  }

  /** As route, for a stream: pinned at its commit point, dropped when it fails after it. */
  routeStream<P>(pin: Pin | undefined, run: (prefer: Preferred) => Promise<Routed<AsyncIterable<P>>>): Promise<Routed<AsyncIterable<P>>> {
    return pin === undefined ? run(undefined) : this.pinnedStream(pin, run);
  }

  private async pinned<T>(pin: Pin, run: (prefer: Preferred) => Promise<Routed<T>>): Promise<Routed<T>> {
    const prefer = await this.lookup(pin);
    try {
      const r = await run(prefer);
      this.keep(pin, r.target);
      return r;
    } catch (err) {
      if (prefer !== undefined && countsAgainstTarget(err)) this.drop(pin);
      throw err;
    }
  }

  private async pinnedStream<P>(pin: Pin, run: (prefer: Preferred) => Promise<Routed<AsyncIterable<P>>>): Promise<Routed<AsyncIterable<P>>> {
    const r = await this.pinned(pin, run);
    return { result: this.dropOnFailure(pin, r.result), target: r.target, attempts: r.attempts, upstreamMs: r.upstreamMs };
  }

  private async *dropOnFailure<P>(pin: Pin, parts: AsyncIterable<P>): AsyncGenerator<P> {
    try {
      yield* parts;
    } catch (err) {
      if (countsAgainstTarget(err)) this.drop(pin);
      throw err;
    }
  }

  private async lookup(pin: Pin): Promise<Preferred> {
    try {
      const raw = await (this.store as StateStore).blobGet(pin.key);
      if (raw === undefined) return undefined;
      const v = JSON.parse(raw) as { b?: unknown; m?: unknown };
      return typeof v.b === 'string' && typeof v.m === 'string' ? { backend: v.b, model: v.m } : undefined;
    } catch {
      return undefined;
    }
  }

  private keep(pin: Pin, t: ResolvedTarget): void {
    (this.store as StateStore).blobSet(pin.key, JSON.stringify({ b: t.backend, m: t.model }), pin.ttlMs).catch(() => {});
  }

  private drop(pin: Pin): void {
    (this.store as StateStore).blobDelete(pin.key).catch(() => {});
  }
}

function countsAgainstTarget(err: unknown): boolean {
  return !(err instanceof GatewayError) || blamesTarget(err);
}

function nonEmpty(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** The session's name, its source as a prefix (an id of one kind never meets another kind's). */
export function sessionId(op: Operation, body: Body, h: SessionHeaders): string | undefined {
  if (h.sessionId !== undefined) return `s:${h.sessionId}`;
  const pck = op === 'chat' || op === 'responses' ? nonEmpty(body.prompt_cache_key) : undefined;
  if (pck !== undefined) return `p:${pck}`;
  if (h.agentSessionId !== undefined) return `a:${h.agentSessionId}`;
  const text = sessionText(op, body);
  return text === undefined ? undefined : `t:${createHash('sha256').update(text).digest('base64url')}`;
}

/**
 * The system prompt and the first user message of the client's body, as text (parts' `text` joined):
 * the same for every turn of one conversation. Undefined when there is neither.
 */
export function sessionText(op: Operation, body: Body): string | undefined {
  let system = '';
  let user = '';
  if (op === 'chat' || op === 'messages') {
    const messages = Array.isArray(body.messages) ? (body.messages as unknown[]) : [];
    if (op === 'messages') system = textOf(body.system);
    for (const m of messages) {
      if (typeof m !== 'object' || m === null) continue;
      const { role, content } = m as { role?: unknown; content?: unknown };
      if (op === 'chat' && system === '' && (role === 'system' || role === 'developer')) system = textOf(content);
      else if (role === 'user') {
        user = textOf(content);
        break;
      }
    }
  } else if (op === 'responses') {
    system = textOf(body.instructions);
    const input = body.input;
    if (typeof input === 'string') user = input;
    else if (Array.isArray(input)) {
      for (const item of input as unknown[]) {
        if (typeof item !== 'object' || item === null) continue;
        const { role, content } = item as { role?: unknown; content?: unknown };
        if (system === '' && (role === 'system' || role === 'developer')) system = textOf(content);
        else if (role === 'user') {
          user = textOf(content);
          break;
        }
      }
    }
  } else {
    return undefined;
  }
  return system === '' && user === '' ? undefined : `${system}\u0000${user}`;
}

/** A content value's text: a string, or the `text` of its parts joined by newlines. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let out = '';
  for (const p of content as unknown[]) {
    const t = typeof p === 'object' && p !== null ? (p as { text?: unknown }).text : undefined;
    if (typeof t === 'string') out = out === '' ? t : `${out}\n${t}`;
  }
  return out;
}
