// The type-aware lint run by `npm run lint` and by `npm test` (scripts/test.mjs) before the tests.
// A small rule set on purpose: each rule catches a bug class the type check lets through. TypeScript
// files are linted with type information from tsconfig.json; the few .js/.mjs/.cjs files get
// ESLint's recommended rules, which need none.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

const restrictedGlobals = [
  {
    name: 'escape',
    message: 'escape() is a legacy URL-percent coder, not a JSON-string coder: use JSON.stringify (or encodeURIComponent for URLs).',
  },
  {
    name: 'unescape',
    message: 'unescape() is a legacy URL-percent decoder, not a JSON-string decoder: use JSON.parse (or decodeURIComponent for URLs).',
  },
  { name: 'isNaN', message: 'The global isNaN coerces its argument: use Number.isNaN.' },
  { name: 'isFinite', message: 'The global isFinite coerces its argument: use Number.isFinite.' },
];

const unusedVars = [
  'error',
  {
    args: 'after-used',
    argsIgnorePattern: '^_',
    varsIgnorePattern: '^_',
    caughtErrorsIgnorePattern: '^_',
    destructuredArrayIgnorePattern: '^_',
    ignoreRestSiblings: true,
  },
];

export default defineConfig(
  {
    ignores: ['node_modules/', 'dist/', 'coverage/', 'bench/results/', 'models/', 'test-output/', '.cache/'],
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    extends: [js.configs.recommended],
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', URL: 'readonly' },
    },
    rules: {
      'no-restricted-globals': ['error', ...restrictedGlobals],
      'no-unused-vars': unusedVars,
    },
  },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.base],
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          // node:test's describe/it/test return promises the runner tracks itself. This also
          // exempts a subtest's t.test(); the runner cancels and fails one left unawaited.
          allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite'] }],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': unusedVars,
      // A switch over a union lists every member or has a default that decides the rest on purpose.
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/no-explicit-any': 'error',
      'no-restricted-globals': ['error', ...restrictedGlobals],
    },
  },
);
