/** The Hono app's environment (its admin and fallback routes). */
import type { HttpBindings } from '@hono/node-server';
import type { Exchange } from './exchange.ts';

export interface AppEnv {
  Bindings: HttpBindings;
  Variables: {
    /** the request's state, opened by the access log middleware */
    x: Exchange;
  };
}
