/**
 * The one rule for how a request target is spelled. Every request is routed by
 * `normalisePath(incoming.url)`, so two spellings of one path reach the same route, guard and
 * error envelope (docs/api.md, "Path spelling"):
 * - the query string (from the first `?`) is not part of the path; handlers read it from the
 *   exchange;
 * - an absolute-form target (`http://host/v1/models`, RFC 9112 §3.2.2) is reduced to its path;
 * - a percent-encoded unreserved character (ALPHA, DIGIT, `-`, `.`, `_`, `~`; RFC 3986 §2.3) is
 *   decoded: `/v1/chat/%63ompletions` is `/v1/chat/completions`. Every other escape stays as sent,
 *   so `%2F` never separates segments; a route's params are decoded once, when they are bound;
 * - runs of `/` are one `/`; dot segments `.` and `..` are resolved (RFC 3986 §5.2.4), never
 *   above the root;
 * - a trailing `/` is dropped (the root `/` stays);
 * - letters keep their case: paths are case-sensitive.
 *
 * Hot path: a target already in this form is checked in one scan, without regex or allocation
 * (only sliced at its `?`); everything else takes the slow way.
 */

const SLASH = 47;
const DOT = 46;
const PERCENT = 37;
const QUERY = 63;

export function normalisePath(target: string): string {
  const n = target.length;
  if (n === 0 || target.charCodeAt(0) !== SLASH) return respell(target);
  let prev = SLASH;
  for (let i = 1; i < n; i++) {
    const c = target.charCodeAt(i);
    if (c === QUERY) return prev === SLASH && i > 1 ? respell(target) : target.slice(0, i);
    if (c === PERCENT || (prev === SLASH && (c === SLASH || c === DOT))) return respell(target);
    prev = c;
  }
  return prev === SLASH && n > 1 ? respell(target) : target;
}

/** `scheme://authority` at the start of an absolute-form target */
const ABSOLUTE = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;
const ESCAPE = /%([0-9A-Fa-f]{2})/g;

/** ALPHA / DIGIT / "-" / "." / "_" / "~" */
function unreserved(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2e || c === 0x5f || c === 0x7e;
}

function decodeUnreserved(encoded: string, hex: string): string {
  const c = parseInt(hex, 16);
  return unreserved(c) ? String.fromCharCode(c) : encoded;
}

function respell(target: string): string {
  let path = target;
  if (path.charCodeAt(0) !== SLASH) {
    const scheme = ABSOLUTE.exec(path);
    // not a path (`*`, garbage): left as it is, so it matches no route
    if (scheme === null) return path;
    path = path.slice(scheme[0].length);
  }
  const q = path.indexOf('?');
  if (q >= 0) path = path.slice(0, q);
  if (path.includes('%')) path = path.replace(ESCAPE, decodeUnreserved);
  const out: string[] = [];
  for (const segment of path.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') out.pop();
    else out.push(segment);
  }
  return `/${out.join('/')}`;
}
