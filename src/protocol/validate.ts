import type { z } from 'zod';
import { invalidRequest, type GatewayError } from '../errors/gateway-error.ts';

type Issue = z.core.$ZodIssue;

/** `['messages', 0, 'content']` → `messages[0].content`, the way OpenAI names a `param`. */
export function paramPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else out += out === '' ? String(seg) : `.${String(seg)}`;
  }
  return out;
}

function describe(issue: Issue): string {
  switch (issue.code) {
    case 'invalid_union': {
      if ('note' in issue && issue.note === 'No matching discriminator') return issue.message;
      // Same choice as fullPath(), so the message describes the param it names.
      if (issue.errors.every((b) => b.every((s) => s.path.length === 0))) {
        // A branch whose type matched but whose check failed (e.g. an empty array) says the most.
        const checked = issue.errors.find((b) => b.length > 0 && b.every((s) => s.code !== 'invalid_type'))?.[0];
        if (checked) return describe(checked);
        const expected = new Set<string>();
        for (const branch of issue.errors) {
          for (const sub of branch) if (sub.code === 'invalid_type') expected.add(sub.expected);
        }
        return expected.size > 0 ? `expected ${[...expected].join(' or ')}` : 'invalid value';
      }
      // Report the deepest branch error: it is the one the client most likely meant.
      const best = issue.errors.flat().sort((a, b) => b.path.length - a.path.length)[0];
      return best ? describe(best) : 'invalid value';
    }
    case 'invalid_type':
      return issue.message.replace(/^Invalid input: /, '');
    case 'unrecognized_keys':
      return `unrecognized field(s): ${issue.keys.join(', ')}`;
    default:
      return issue.message.replace(/^Invalid input: /, '');
  }
}

function fullPath(issue: Issue): ReadonlyArray<PropertyKey> {
  if (issue.code === 'invalid_union' && !('note' in issue && issue.note)) {
    const hasTypeOnly = issue.errors.every((b) => b.every((s) => s.path.length === 0));
    if (!hasTypeOnly) {
      const best = issue.errors.flat().sort((a, b) => b.path.length - a.path.length)[0];
      if (best) return [...issue.path, ...fullPath(best)];
    }
  }
  return issue.path;
}

/**
 * Checks `body` against `schema` and returns the client's own object, or throws one 400 naming the
 * first offending parameter. The object is returned rather than zod's copy, which puts known keys
 * first: what goes upstream keeps the client's key order, so OpenAI-compatible upstreams get the
 * client's body with only `model` replaced. So request schemas must only check (loose objects, no
 * defaults, coercions or transforms), which makes zod's output equal to its input.
 */
export function parseRequest<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalidRequest('The request body must be a JSON object.');
  }
  const r = schema.safeParse(body);
  if (r.success) return body as z.infer<S>;
  throw issuesToError(r.error.issues);
}

export function issuesToError(issues: ReadonlyArray<Issue>): GatewayError {
  const first = issues[0];
  if (!first) return invalidRequest('Invalid request body.');
  const param = paramPath(fullPath(first));
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more problem${issues.length > 2 ? 's' : ''})` : '';
  const msg = param === '' ? `Invalid request body: ${describe(first)}${more}` : `Invalid value for '${param}': ${describe(first)}${more}`;
  return invalidRequest(msg, param === '' ? null : param);
}
