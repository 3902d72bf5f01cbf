import { embeddingRequestSchema, RawEmbeddingResponse } from '../../protocol/embeddings/schema.ts';
import { parseRequest } from '../../protocol/validate.ts';
import type { GenerationDeps } from '../deps.ts';
import { readJsonBody } from '../body.ts';
import { sendBody, sendJson } from '../direct.ts';
import { markRouted, markUsage, requestFacts } from '../respond.ts';
import type { Exchange } from '../exchange.ts';

export function embeddingsHandler(deps: GenerationDeps) {
  return async (x: Exchange): Promise<void> => {
    const body = await readJsonBody(x, deps.config.server.max_body_bytes);
    const req = parseRequest(embeddingRequestSchema, body);
    x.log.model = req.model;
    const r = await deps.operations.embed(req, requestFacts(x));
    markRouted(x, r);
    markUsage(x, r.result.usage);
    const timeout = deps.config.server.send_timeout_ms;
    const raw = r.result;
    // the upstream's bytes as they came; once written, their buffer may serve the next answer
    if (raw instanceof RawEmbeddingResponse) sendBody(x, 200, 'application/json', raw.bytes, timeout, () => raw.sent());
    else sendJson(x, 200, r.result, timeout);
  };
}
