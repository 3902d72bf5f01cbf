import type { Context } from 'hono';
import { embeddingRequestSchema, RawEmbeddingResponse } from '../protocol/embeddings.ts';
import { parseRequest } from '../protocol/validate.ts';
import type { Deps } from '../deps.ts';
import { readJsonBody } from './body.ts';
import { json, markRouted, markUsage, requestInfo } from './respond.ts';
import type { AppEnv } from './types.ts';

export function embeddingsHandler(deps: Deps) {
  return async (c: Context<AppEnv>): Promise<Response> => {
    const body = await readJsonBody(c, deps.config.server.max_body_bytes);
    const req = parseRequest(embeddingRequestSchema, body);
    const log = c.get('log');
    log.model = req.model;
    const r = await deps.gateway.embed(req, requestInfo(c));
    markRouted(c, r);
    markUsage(c, r.result.usage);
    if (r.result instanceof RawEmbeddingResponse) {
      c.header('content-type', 'application/json');
      return c.body(r.result.bytes, 200);
    }
    return json(c, 200, r.result);
  };
}
