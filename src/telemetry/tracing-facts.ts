/** What the request path tells tracing at its hooks: plain facts, so the hooks stay one call each. */

/** What the access log knows when a request ends (a structural view of http's RequestLog). */
export interface RequestEndFacts {
  route: string;
  model?: string | undefined;
  backend?: string | undefined;
  upstreamModel?: string | undefined;
  attempts?: number | undefined;
  errorCode?: string | null | undefined;
  promptTokens?: number | undefined;
  completionTokens?: number | undefined;
  stream?: boolean | undefined;
  key?: string | undefined;
  costUsd?: number | undefined;
  cache?: 'hit' | 'miss' | 'bypass' | undefined;
  ttftMs?: number | undefined;
}

/** What the router knows when it starts an attempt. */
export interface AttemptFacts {
  op: string;
  /** model name sent upstream */
  model: string;
  publicModel: string;
  backend: string;
  backendType: string;
  policy: string;
  attempt: number;
  retry: number;
  failover: boolean;
  breaker: string;
  maxTokens?: number | undefined;
}

/** A failure as the router classified it. */
export interface FailureFacts {
  status: number;
  code?: string | null | undefined;
  type: string;
  message: string;
}
