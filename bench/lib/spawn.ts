import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tracked } from './children.js';

export const BENCH_DIR = join(dirname(fileURLToPath(import.meta.url)), '..');

export interface Proc {
  child: ChildProcess;
  pid: number;
  output: () => string;
  /** Resolves when a line of stdout matches. */
  line(pred: (l: string) => boolean, what: string, timeoutMs?: number): Promise<string>;
  stop(): Promise<void>;
}

/** A node script of bench/ (built) as its own process, its output kept. */
export function spawnNode(script: string, args: string[], env: NodeJS.ProcessEnv = process.env): Proc {
  const child = tracked(spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env }));
  let out = '';
  const waiters: { pred: (l: string) => boolean; resolve: (l: string) => void }[] = [];
  let buffer = '';
  child.stdout?.on('data', (d: Buffer) => {
    const text = d.toString();
    if (out.length < 200_000) out += text;
    buffer += text;
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const l = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      for (const w of [...waiters]) {
        if (w.pred(l)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(l);
        }
      }
    }
  });
  child.stderr?.on('data', (d: Buffer) => {
    if (out.length < 200_000) out += d.toString();
  });
  return {
    child,
    pid: child.pid as number,
    output: () => out,
    line(pred, what, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`${script}: no "${what}" within ${timeoutMs} ms\n${out.slice(-2000)}`)), timeoutMs);
        child.once('exit', () => reject(new Error(`${script} exited before "${what}"\n${out.slice(-2000)}`)));
        waiters.push({
          pred,
          resolve: (l) => {
            clearTimeout(t);
            resolve(l);
          },
        });
      });
    },
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
