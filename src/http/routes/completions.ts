import type { Deps } from '../deps.ts';
import { completionRequestSchema } from '../../protocol/completions/schema.ts';
import { generationHandler } from './generate.ts';

export function completionsHandler(deps: Deps) {
  return generationHandler(deps, {
    schema: completionRequestSchema,
    once: (d, req, info) => d.gateway.complete(req, info),
    stream: (d, req, info) => d.gateway.completeStream(req, info),
  });
}
