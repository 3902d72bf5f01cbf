/**
 * The route table of both planes: method + path pattern → handler on an `Exchange`, with each
 * route's plane (the API, or the operator's admin routes), guard and error envelope. Paths are
 * looked up after normalisePath (path.ts).
 *
 * Patterns: literal segments, `{name}` (one segment) and, last only, `{name+}` (one or more
 * segments, slashes kept: model ids like `org/model`). Params are percent-decoded once, when bound
 * (a malformed escape is kept as sent).
 *
 * Hot path: a path without params is found by one Map lookup and its method by a second, with
 * nothing allocated; only a path that misses them is matched against the patterns.
 */
import type { Envelope, Exchange, Params } from './exchange.ts';

export type Method = 'GET' | 'POST' | 'DELETE';

/** A route that writes its answer itself (direct.ts, sse.ts); it throws what should become an error answer. */
export type ApiHandler = (x: Exchange) => Promise<void>;

/**
 * Who may call a route: throws the refusal (401, 403, 503), returns when the request may go on.
 * Synchronous: it runs before the handler, on the request's first tick.
 */
export type Guard = (x: Exchange) => void;

/**
 * `api`: the clients' routes (`/v1/*`): counted in flight, traced, behind the overload gate.
 * `admin`: the operator's (health, metrics, status and the admin API), each with its own guard.
 */
export type Plane = 'api' | 'admin';

export interface RouteOptions {
  envelope?: Envelope;
  plane?: Plane;
  /** undefined: open to anyone */
  guard?: Guard | undefined;
}

export interface Route {
  readonly method: Method;
  /** as registered; the request's log line and metrics name the route by it */
  readonly pattern: string;
  readonly handler: ApiHandler;
  readonly envelope: Envelope;
  readonly plane: Plane;
  readonly guard: Guard | undefined;
  /** POST routes read a request body; for the others an unread body is settled before the handler runs */
  readonly readsBody: boolean;
}

/** Every route of one path pattern, by method. */
export class RoutesAt {
  private readonly byMethod = new Map<string, Route>();
  /** the `allow` header of a 405 here */
  allow = '';
  /** the envelope of a 405 here (that of its routes) */
  envelope: Envelope = 'openai';
  /** the plane of this path's routes, and the guard a 405 here passes first (that of its routes) */
  plane: Plane = 'api';
  guard: Guard | undefined = undefined;
  /** this path's match when it has no params (shared: nothing may change it) */
  readonly exact: Match = { at: this, params: Object.freeze({}) };

  constructor(readonly pattern: string) {}

  add(route: Route): void {
    if (this.byMethod.has(route.method)) throw new Error(`route ${route.method} ${route.pattern} registered twice`);
    this.byMethod.set(route.method, route);
    this.allow = [...this.byMethod.keys()].join(', ');
    this.envelope = route.envelope;
    this.plane = route.plane;
    this.guard = route.guard;
  }

  /** The route for `method`; HEAD is served by the GET route (Node sends no body with it). */
  route(method: string): Route | undefined {
    return this.byMethod.get(method === 'HEAD' ? 'GET' : method);
  }
}

export interface Match {
  readonly at: RoutesAt;
  readonly params: Params;
}

interface Pattern {
  /** literal segments as themselves, params as their name */
  readonly segments: readonly string[];
  /** which segments are params */
  readonly isParam: readonly boolean[];
  /** the last segment takes the rest of the path */
  readonly rest: boolean;
  readonly at: RoutesAt;
}

const PARAM = /^\{([A-Za-z_][A-Za-z0-9_]*)(\+?)\}$/;

function decode(s: string): string {
  if (!s.includes('%')) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export class RouteTable {
  private readonly exact = new Map<string, RoutesAt>();
  private readonly patterns: Pattern[] = [];
  private readonly areas: Array<{ prefix: string; envelope: Envelope }> = [];
  private defaultOptions: RouteOptions = {};

  /** The plane and guard of the routes added after this call (until the next call). */
  defaults(opts: RouteOptions): this {
    this.defaultOptions = opts;
    return this;
  }

  /**
   * Paths at or under `prefix` answer errors in `envelope`: routes registered there without an
   * envelope of their own, and a 404 for a path there that matches no route.
   */
  area(prefix: string, envelope: Envelope): this {
    this.areas.push({ prefix, envelope });
    this.areas.sort((a, b) => b.prefix.length - a.prefix.length);
    return this;
  }

  /** The envelope of errors at `path` when no route there says otherwise. */
  envelopeOf(path: string): Envelope {
    for (const { prefix, envelope } of this.areas) {
      if (path.startsWith(prefix) && (path.length === prefix.length || path.charCodeAt(prefix.length) === 47)) return envelope;
    }
    return 'openai';
  }

  add(method: Method, pattern: string, handler: ApiHandler, options: RouteOptions = {}): this {
    if (!pattern.startsWith('/') || (pattern.length > 1 && pattern.endsWith('/'))) throw new Error(`route pattern ${pattern}: a normalised path is expected`);
    const opts = { ...this.defaultOptions, ...options };
    const route: Route = {
      method,
      pattern,
      handler,
      envelope: opts.envelope ?? this.envelopeOf(pattern),
      plane: opts.plane ?? 'api',
      guard: opts.guard,
      readsBody: method === 'POST',
    };
    const at = this.routesAt(pattern);
    if (at.allow !== '' && (at.plane !== route.plane || at.guard !== route.guard)) throw new Error(`route ${method} ${pattern}: every route of one path has the same plane and guard`);
    at.add(route);
    return this;
  }

  private routesAt(pattern: string): RoutesAt {
    const segments = pattern.split('/').slice(1);
    const names = segments.map((s) => PARAM.exec(s));
    if (names.every((m) => m === null)) {
      let at = this.exact.get(pattern);
      if (!at) this.exact.set(pattern, (at = new RoutesAt(pattern)));
      return at;
    }
    for (const p of this.patterns) if (p.at.pattern === pattern) return p.at;
    const restAt = names.findIndex((m) => m?.[2] === '+');
    if (restAt >= 0 && restAt !== segments.length - 1) throw new Error(`route pattern ${pattern}: {name+} must be the last segment`);
    const at = new RoutesAt(pattern);
    this.patterns.push({
      segments: segments.map((s, i) => names[i]?.[1] ?? s),
      isParam: names.map((m) => m !== null),
      rest: restAt >= 0,
      at,
    });
    return at;
  }

  /** The routes at a normalised path, and the params its pattern binds; undefined: no route has this path. */
  find(path: string): Match | undefined {
    const at = this.exact.get(path);
    if (at !== undefined) return at.exact;
    if (this.patterns.length === 0) return undefined;
    const parts = path.split('/').slice(1);
    for (const p of this.patterns) {
      const params = bind(p, parts);
      if (params !== undefined) return { at: p.at, params };
    }
    return undefined;
  }
}

function bind(p: Pattern, parts: readonly string[]): Params | undefined {
  const n = p.segments.length;
  if (p.rest ? parts.length < n : parts.length !== n) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < n; i++) {
    const want = p.segments[i] as string;
    const part = parts[i] as string;
    if (!p.isParam[i]) {
      if (part !== want) return undefined;
    } else if (p.rest && i === n - 1) {
      params[want] = decode(parts.slice(i).join('/'));
    } else {
      if (part === '') return undefined;
      params[want] = decode(part);
    }
  }
  return params;
}
