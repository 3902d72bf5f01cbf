import type { Context } from 'hono';
import { embeddingRequestSchema, RawEmbeddingResponse } from '../protocol/embeddings.ts';
import { parseRequest } from '../protocol/validate.ts';
import type { Deps } from '../deps.ts';
import { readJsonBody } from './body.ts';
import { sendBody, sendJson } from './direct.ts';
import { markRouted, markUsage, requestInfo } from './respond.ts';
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
    const timeout = deps.config.server.send_timeout_ms;
    const raw = r.result;
    // the upstream's bytes as they came; once written, their buffer may serve the next answer
    if (raw instanceof RawEmbeddingResponse) return sendBody(c, 200, 'application/json', raw.bytes, timeout, () => raw.sent());
    return sendJson(c, 200, r.result, timeout);
  };
}
