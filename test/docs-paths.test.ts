/**
 * docs/architecture.md is the map of the inside: every file or folder it names in backticks exists.
 * A path from the repository root (`src/…`, `test/…`, `bench/…`, `docs/…`, `scripts/…`) is checked
 * as written; a shorter one (`pipeline.ts`, `upstream/errors.ts`) is read, as a table cell reads it,
 * in the folder of the last full path before it on the same line or one of that folder's parents
 * up to `src/`, else in `src/`, else at the repository root.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';

const root = join(import.meta.dirname, '..');
const ROOTS = /^(src|test|bench|docs|scripts|\.ci)\//;
const PATH_LIKE = /^[\w.@-][\w./@-]*(\.(ts|md|cjs|mjs|js|json|ya?ml)|\/)$/;

/** The folders a short path may be read in, nearest first. */
function candidates(short: string, base: string | undefined): string[] {
  const out: string[] = [];
  if (base !== undefined) {
    let dir = base;
    for (;;) {
      out.push(join(dir, short));
      if (dir === '.' || dir === 'src') break;
      dir = dirname(dir);
    }
  }
  if (short.includes('/')) out.push(join('src', short));
  out.push(short);
  return out;
}

/** Every path-like token of the document with where it was found, and whether it exists. */
function check(doc: string): { token: string; line: number; tried: string[]; found: boolean }[] {
  const out: { token: string; line: number; tried: string[]; found: boolean }[] = [];
  doc.split('\n').forEach((text, i) => {
    let base: string | undefined;
    for (const m of text.matchAll(/`([^`\s]+)`/g)) {
      const token = m[1] ?? '';
      if (!PATH_LIKE.test(token) || token.includes('<') || token.startsWith('.') && !token.startsWith('.ci/')) continue;
      const tried = ROOTS.test(token) ? [token] : candidates(token, base);
      out.push({ token, line: i + 1, tried, found: tried.some((p) => existsSync(join(root, p))) });
      if (ROOTS.test(token)) base = token.endsWith('/') ? token.slice(0, -1) : dirname(token);
    }
  });
  return out;
}

test('every path docs/architecture.md names exists', () => {
  const results = check(readFileSync(join(root, 'docs/architecture.md'), 'utf8'));
  assert.ok(results.length > 50, `the document names files (${results.length} found)`);
  const missing = results.filter((r) => !r.found).map((r) => `line ${r.line}: ${r.token} (tried ${r.tried.join(', ')})`);
  assert.deepEqual(missing, []);
});

test('the check reads short paths in the folder of the full path before them, and finds what is gone', () => {
  const r = check('| x | `src/gateway/pipeline.ts` · `operations.ts` · `no-such-file.ts` · `backends/upstream/client.ts` |');
  assert.deepEqual(
    r.map((x) => [x.token, x.found]),
    [
      ['src/gateway/pipeline.ts', true],
      ['operations.ts', true],
      ['no-such-file.ts', false],
      ['backends/upstream/client.ts', true],
    ],
  );
});
