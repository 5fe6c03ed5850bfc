import { afterAll } from 'vitest';
import { killLeftoverBrokers } from '../../bench/lib/broker.js';
import { killLeftoverAgents } from './agent-process.js';

// Runs after every test file, passed or failed: no agent or broker outlives the file that started it.
afterAll(() => {
  killLeftoverAgents();
  killLeftoverBrokers();
});
