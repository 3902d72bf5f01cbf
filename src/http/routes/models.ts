import { modelNotFound } from '../../errors/gateway-error.ts';
import type { GenerationDeps } from '../deps.ts';
import { sendJson } from '../direct.ts';
import type { Exchange } from '../exchange.ts';

const card = (id: string, created: number) => ({ id, object: 'model' as const, created, owned_by: 'switchyard' });

/** GET /v1/models: the public model names the key may use. */
export function listModelsHandler(deps: GenerationDeps) {
  return async (x: Exchange): Promise<void> => {
    const created = Math.floor(deps.startedAt / 1000);
    sendJson(x, 200, { object: 'list', data: deps.operations.models(x.keyName).map((id) => card(id, created)) }, deps.config.server.send_timeout_ms);
  };
}

/**
 * GET /v1/models/{model+}: a model the key may use, listed or served by a pattern (ids may hold
 * slashes, sent as they are or as %2F).
 */
export function getModelHandler(deps: GenerationDeps) {
  return async (x: Exchange): Promise<void> => {
    const id = x.params.model ?? '';
    if (!deps.operations.servesModel(id, x.keyName)) throw modelNotFound(id);
    sendJson(x, 200, card(id, Math.floor(deps.startedAt / 1000)), deps.config.server.send_timeout_ms);
  };
}
