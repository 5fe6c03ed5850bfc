// ESLint for the TypeScript sources: typescript-eslint's recommended rules, plus the two
// type-aware rules that catch what tsc cannot: a promise nobody awaits or catches
// (no-floating-promises: an unhandled rejection ends the process) and a promise where a plain
// callback is expected (no-misused-promises: an event handler whose rejection nobody sees).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'native/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // A leading underscore says "unused on purpose" (a parameter an interface requires, a
      // property taken out of an object by destructuring).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' }],
    },
  },
  {
    files: ['**/*.mjs', '**/*.cjs', '**/*.js'],
    rules: { '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }] },
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly', fetch: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', setImmediate: 'readonly', clearImmediate: 'readonly', SharedArrayBuffer: 'readonly', Atomics: 'readonly', require: 'readonly', module: 'writable', __dirname: 'readonly' } },
  },
);
