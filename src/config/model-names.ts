/** The syntax of `models:` names: a `*` makes a pattern; a target's model may hold `${N}` placeholders. */

/** `${0}`…`${9}` in a target's model: filled from the name the client sent (router/model-routes.ts). */
export const PLACEHOLDER = /\$\{(\d)\}/g;

export function isPattern(key: string): boolean {
  return key.includes('*');
}

/** How many `*` a key has. */
export function starCount(key: string): number {
  let n = 0;
  for (const c of key) if (c === '*') n++;
  return n;
}

/** The highest `${N}` a target model names, or -1. */
export function highestPlaceholder(model: string): number {
  let max = -1;
  for (const m of model.matchAll(PLACEHOLDER)) max = Math.max(max, Number(m[1]));
  return max;
}
