import type { GenerationDeps } from '../deps.ts';
import { completionRequestSchema } from '../../protocol/completions/schema.ts';
import { generationHandler } from './generate.ts';

export function completionsHandler(deps: GenerationDeps) {
  return generationHandler(deps, {
    schema: completionRequestSchema,
    once: (d, req, info) => d.operations.complete(req, info),
    stream: (d, req, info) => d.operations.completeStream(req, info),
  });
}
