import type { HttpBindings } from '@hono/node-server';

export interface RequestLog {
  route: string;
  model?: string;
  backend?: string;
  upstreamModel?: string;
  attempts?: number;
  errorCode?: string | null;
  promptTokens?: number;
  completionTokens?: number;
  stream?: boolean;
  key?: string;
}

export interface AppEnv {
  Bindings: HttpBindings;
  Variables: {
    requestId: string;
    keyName: string | undefined;
    log: RequestLog;
    /** size of the request body as received */
    bodyBytes: number | undefined;
  };
}
