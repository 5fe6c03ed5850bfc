export { freePort, waitForPort } from '../../bench/lib/ports.js';
