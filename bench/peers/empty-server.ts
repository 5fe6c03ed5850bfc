/**
 * The control for event-loop blocks: a Node process that does nothing but answer GET requests
 * with 200 {}. Probed the same way and at the same time as the agent, its slow answers are the
 * machine's stalls (another process, the kernel, the prober itself), not a block of the agent's.
 * Usage: node dist/bench/peers/empty-server.js PORT. Prints "listening".
 */
import { createServer } from 'node:http';

const port = Number(process.argv[2]);
const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
server.listen(port, '127.0.0.1', () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
