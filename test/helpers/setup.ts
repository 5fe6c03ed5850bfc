import { afterAll } from 'vitest';
import { killLeftoverAgents } from './agent-process.js';

// Runs after every test file, passed or failed.
afterAll(() => killLeftoverAgents());
