import { afterAll } from 'vitest';
import { killLeftovers } from '../../bench/lib/children.js';

// Runs after every test file, passed or failed: no agent or broker outlives the file that started it.
afterAll(() => {
  killLeftovers();
});
