import type { Context } from 'hono';
import { modelNotFound } from '../../errors/gateway-error.ts';
import type { Deps } from '../deps.ts';
import { json } from '../respond.ts';
import type { AppEnv } from '../types.ts';

const card = (id: string, created: number) => ({ id, object: 'model' as const, created, owned_by: 'switchyard' });

export function listModelsHandler(deps: Deps) {
  return (c: Context<AppEnv>): Response => {
    const created = Math.floor(deps.startedAt / 1000);
    return json(c, 200, { object: 'list', data: deps.gateway.models(c.get('x').keyName).map((id) => card(id, created)) });
  };
}

export function getModelHandler(deps: Deps) {
  return (c: Context<AppEnv>): Response => {
    const id = decodeURIComponent(c.req.path.slice('/v1/models/'.length));
    if (!deps.gateway.models(c.get('x').keyName).includes(id)) throw modelNotFound(id);
    return json(c, 200, card(id, Math.floor(deps.startedAt / 1000)));
  };
}
