import type { Deps } from '../deps.ts';
import { chatRequestSchema } from '../../protocol/chat/schema.ts';
import { generationHandler } from './generate.ts';

export function chatHandler(deps: Deps) {
  return generationHandler(deps, {
    schema: chatRequestSchema,
    once: (d, req, info) => d.gateway.chat(req, info),
    stream: (d, req, info) => d.gateway.chatStream(req, info),
  });
}
