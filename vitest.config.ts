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
    // The files wait on brokers, agents, proxies and timers far more than they compute: at two at
    // a time the suite kept one core of two busy. At four it takes about two thirds of the time,
    // also with the other core taken (CI runs a guest beside it).
    maxWorkers: 4,
    // The closing line says what was skipped for a missing tool, and how to get it.
    reporters: ['default', './test/helpers/missing-tools-reporter.ts'],
  },
});
