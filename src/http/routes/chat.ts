import type { GenerationDeps } from '../deps.ts';
import { chatRequestSchema } from '../../protocol/chat/schema.ts';
import { generationHandler } from './generate.ts';

export function chatHandler(deps: GenerationDeps) {
  return generationHandler(deps, {
    schema: chatRequestSchema,
    once: (d, req, info) => d.operations.chat(req, info),
    stream: (d, req, info) => d.operations.chatStream(req, info),
  });
}
