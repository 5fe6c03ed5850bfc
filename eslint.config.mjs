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
    // The store's writer thread runs these files as they are under the test runner (Node strips
    // their types; it transforms nothing): no parameter properties, enums or namespaces.
    files: ['agent/store/store-writer.ts', 'agent/store/writes.ts', 'agent/store/writer-protocol.ts', 'agent/store/records.ts'],
    rules: {
      '@typescript-eslint/parameter-properties': ['error', { prefer: 'class-property' }],
      'no-restricted-syntax': ['error', { selector: 'TSEnumDeclaration', message: 'Node type stripping cannot run an enum' }, { selector: 'TSModuleDeclaration', message: 'Node type stripping cannot run a namespace' }],
    },
  },
  {
    files: ['**/*.mjs', '**/*.cjs', '**/*.js'],
    rules: { '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }] },
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly', fetch: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', setImmediate: 'readonly', clearImmediate: 'readonly', SharedArrayBuffer: 'readonly', Atomics: 'readonly', require: 'readonly', module: 'writable', __dirname: 'readonly' } },
  },
);
