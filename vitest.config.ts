import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // One scratch root per run, removed at its end: see the file.
    globalSetup: ['test/helpers/scratch-root.ts'],
    setupFiles: ['test/helpers/setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
    // The closing line says what was skipped for a missing tool, and how to get it.
    reporters: ['default', './test/helpers/missing-tools-reporter.ts'],
  },
});
