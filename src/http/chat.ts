import type { Context } from 'hono';
import { chatRequestSchema } from '../protocol/chat.ts';
import { parseRequest } from '../protocol/validate.ts';
import type { Deps } from '../deps.ts';
import { readJsonBody } from './body.ts';
import { json, markRouted, requestInfo } from './respond.ts';
import { SSE_HEADERS, sseBody } from './sse.ts';
import type { AppEnv } from './types.ts';

export function chatHandler(deps: Deps) {
  return async (c: Context<AppEnv>): Promise<Response> => {
    const body = await readJsonBody(c, deps.config.server.max_body_bytes);
    const req = parseRequest(chatRequestSchema, body);
    const log = c.get('log');
    log.model = req.model;
    log.stream = req.stream === true;
    if (req.stream) {
      const s = await deps.gateway.chatStream(req, requestInfo(c));
      markRouted(c, s);
      for (const [k, v] of Object.entries(SSE_HEADERS)) c.header(k, v);
      const stream = sseBody(s.result, (err) => {
        log.promptTokens = s.usage.value?.prompt_tokens;
        log.completionTokens = s.usage.value?.completion_tokens;
        if (err) log.errorCode = err.code ?? err.type;
      });
      return c.body(stream, 200);
    }
    const r = await deps.gateway.chat(req, requestInfo(c));
    markRouted(c, r);
    log.promptTokens = r.result.usage?.prompt_tokens;
    log.completionTokens = r.result.usage?.completion_tokens;
    return json(c, 200, r.result);
  };
}
