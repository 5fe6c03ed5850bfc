import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tracked } from './children.js';

export const MAIN = process.env['BENCH_AGENT_MAIN'] ?? join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'agent', 'main.js');

export interface BenchAgent {
  child: ChildProcess;
  /** Bytes written to stdout: what journald would store. */
  logBytes: () => number;
  output: () => string;
  stop(): Promise<void>;
}

export function writeAgentConfig(dir: string, body: string): string {
  const path = join(dir, 'config.yaml');
  writeFileSync(path, body);
  return path;
}

/** The built agent as a separate process, the way systemd runs it. */
export function startAgent(configPath: string, env: NodeJS.ProcessEnv = process.env): BenchAgent {
  const child = tracked(spawn(process.execPath, [MAIN, 'run', '--config', configPath], { stdio: ['ignore', 'pipe', 'pipe'], env }));
  let bytes = 0;
  let text = '';
  child.stdout?.on('data', (d: Buffer) => {
    bytes += d.length;
    if (text.length < 100_000) text += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => (text += d.toString()));
  return {
    child,
    logBytes: () => bytes,
    output: () => text,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
