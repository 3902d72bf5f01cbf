/**
 * The shared shape of the two generation routes (chat completions and legacy completions): read
 * and validate the body, then answer as JSON or as an SSE stream, recording who served it, tokens,
 * cost and time to first chunk.
 */
import type { z } from 'zod';
import type { GenerationDeps } from '../deps.ts';
import type { RequestFacts, StreamResult } from '../../gateway/operations.ts';
import { parseRequest } from '../../protocol/validate.ts';
import type { StreamPart } from '../../protocol/stream-part.ts';
import type { Routed } from '../../router/router.ts';
import type { TokenUsage } from '../../telemetry/cost.ts';
import { readJsonBody } from '../body.ts';
import { sendJson } from '../direct.ts';
import type { Exchange } from '../exchange.ts';
import { markRouted, markUsage, sendStream, requestFacts } from '../respond.ts';

export interface GenerateRoute<Req, Full, Chunk extends StreamPart> {
  schema: z.ZodType<Req>;
  once(deps: GenerationDeps, req: Req, info: RequestFacts): Promise<Routed<Full>>;
  stream(deps: GenerationDeps, req: Req, info: RequestFacts): Promise<StreamResult<Chunk>>;
}

export function generationHandler<Req extends { model: string; stream?: boolean | null | undefined }, Full extends { usage?: TokenUsage | null | undefined }, Chunk extends StreamPart>(
  deps: GenerationDeps,
  g: GenerateRoute<Req, Full, Chunk>,
) {
  return async (x: Exchange): Promise<void> => {
    const body = await readJsonBody(x, deps.config.server.max_body_bytes);
    const req = parseRequest(g.schema, body);
    const log = x.log;
    log.model = req.model;
    log.stream = req.stream === true;
    if (req.stream) {
      const s = await g.stream(deps, req, requestFacts(x));
      markRouted(x, s);
      sendStream(deps, x, s);
      return;
    }
    const r = await g.once(deps, req, requestFacts(x));
    markRouted(x, r);
    markUsage(x, r.result.usage);
    sendJson(x, 200, r.result, deps.config.server.send_timeout_ms);
  };
}
