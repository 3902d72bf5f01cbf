/**
 * The OpenAI Responses API's stored responses, per API key (another key's id is as unknown as a
 * missing one): `GET /v1/responses/{id}`, `GET /v1/responses/{id}/input_items` and
 * `DELETE /v1/responses/{id}` (gateway/responses-store.ts). `POST /v1/responses` (responses.ts)
 * stores them.
 */
import type { GenerationDeps } from '../deps.ts';
import { GatewayError, invalidRequest } from '../../errors/gateway-error.ts';
import { listInputItems, type ResponsesStore } from '../../gateway/responses-store.ts';
import { sendJson } from '../direct.ts';
import type { Exchange } from '../exchange.ts';

const OWNER_WITHOUT_KEY = 'anonymous';

function storeOf(deps: GenerationDeps): ResponsesStore {
  return deps.responses;
}

/** Whose stored responses a request reads and writes: its API key's. */
export function owner(x: Exchange): string {
  return x.keyName ?? OWNER_WITHOUT_KEY;
}

/** OpenAI's answer for an unknown, expired or another key's response id. */
function responseNotFound(id: string): GatewayError {
  return new GatewayError('item_not_found', `Response with id '${id}' not found.`);
}

function idParam(x: Exchange): string {
  return x.params['id'] ?? '';
}

/** GET /v1/responses/{id} */
export function getResponseHandler(deps: GenerationDeps) {
  return async (x: Exchange): Promise<void> => {
    const id = idParam(x);
    const rec = await storeOf(deps).get(owner(x), id);
    if (!rec) throw responseNotFound(id);
    sendJson(x, 200, rec.response, deps.config.server.send_timeout_ms);
  };
}

/** GET /v1/responses/{id}/input_items (`limit` 1–100, `order` asc|desc, `after`, `before`, as OpenAI pages them) */
export function inputItemsHandler(deps: GenerationDeps) {
  return async (x: Exchange): Promise<void> => {
    const id = idParam(x);
    const q = x.query();
    const limitText = q.get('limit');
    const limit = limitText === null ? undefined : Number(limitText);
    if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 100)) {
      throw invalidRequest(`Invalid 'limit': expected an integer from 1 to 100, got '${limitText}'.`, 'limit', 'invalid_value');
    }
    const order = q.get('order') ?? undefined;
    if (order !== undefined && order !== 'asc' && order !== 'desc') throw invalidRequest(`Invalid 'order': expected 'asc' or 'desc'.`, 'order', 'invalid_value');
    const rec = await storeOf(deps).get(owner(x), id);
    if (!rec) throw responseNotFound(id);
    const list = listInputItems(rec, { limit, order, after: q.get('after') ?? undefined, before: q.get('before') ?? undefined });
    sendJson(x, 200, list, deps.config.server.send_timeout_ms);
  };
}

/** DELETE /v1/responses/{id} */
export function deleteResponseHandler(deps: GenerationDeps) {
  return async (x: Exchange): Promise<void> => {
    const id = idParam(x);
    const deleted = await storeOf(deps).delete(owner(x), id);
    if (!deleted) throw responseNotFound(id);
    sendJson(x, 200, { id, object: 'response', deleted: true }, deps.config.server.send_timeout_ms);
  };
}
