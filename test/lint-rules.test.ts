/**
 * The linter catches each bug class it is configured for (eslint.config.js), on a source file with
 * one instance of each, linted with the project's own type information. A rule dropped from the
 * config, or a config that stops applying to src/, fails here.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ESLint } from 'eslint';

const PROBE = `
type Kind = 'a' | 'b' | 'c';
export function decode(s: string): string {
  return unescape(s) + escape(s);
}
export function kind(k: Kind): number {
  switch (k) {
    case 'a':
      return 1;
    case 'b':
      return 2;
  }
  return 0;
}
async function work(): Promise<number> {
  return 1;
}
export function fire(): void {
  work();
  [1, 2].forEach(async () => {
    await work();
  });
  if (isNaN(Number('x'))) return;
}
export function loose(x: any): unknown {
  const unused = 1;
  return x;
}
`;

test('the lint rules find unescape/escape, floating and misused promises, a missed case, any, unused bindings', async () => {
  const eslint = new ESLint({ cwd: process.cwd() });
  // a path inside src/ (so the TypeScript rules and the type information apply); the text is linted, not the file
  const [result] = await eslint.lintText(PROBE, { filePath: 'src/lib/abort.ts' });
  assert.ok(result);
  const found = result.messages.map((m) => `${m.ruleId ?? 'parse'} @${m.line}`);
  const line = (text: string): number => PROBE.split('\n').findIndex((l) => l.includes(text)) + 1;
  const expect = [
    `no-restricted-globals @${line('return unescape')}`, // unescape and escape on the same line
    `@typescript-eslint/switch-exhaustiveness-check @${line('switch (k)')}`,
    `@typescript-eslint/no-floating-promises @${line('  work();')}`,
    `@typescript-eslint/no-misused-promises @${line('forEach(async')}`,
    `no-restricted-globals @${line('isNaN(')}`,
    `@typescript-eslint/no-explicit-any @${line('x: any')}`,
    `@typescript-eslint/no-unused-vars @${line('const unused')}`,
  ];
  for (const e of expect) assert.ok(found.includes(e), `expected ${e}; found ${found.join(', ')}`);
  assert.equal(found.filter((f) => f.startsWith('no-restricted-globals') && f.endsWith(`@${line('return unescape')}`)).length, 2, 'both escape and unescape are named');
});
