import { spawn, type ChildProcess } from 'node:child_process';
import { tracked } from '../../bench/lib/children.js';
import { MAIN } from './cli.js';

export interface LogLine {
  level: string;
  msg: string;
  [k: string]: unknown;
}

/**
 * Registers a process a test spawned itself, so it is killed if the test fails before it
 * (test/helpers/setup.ts kills the leftovers after each file). The bench's registry: one list of
 * what must not outlive its starter, agents, peers and brokers alike.
 */
export const track = tracked;

/** The built agent as a child process, its JSON log lines parsed as they come. */
export class AgentProcess {
  readonly lines: LogLine[] = [];
  raw = '';
  stderr = '';
  private buffer = '';
  private waiters: { pred: (l: LogLine) => boolean; resolve: (l: LogLine) => void }[] = [];
  readonly exited: Promise<number | null>;

  private constructor(readonly child: ChildProcess) {
    child.stdout?.on('data', (d: Buffer) => this.onData(d.toString()));
    child.stderr?.on('data', (d: Buffer) => (this.stderr += d.toString()));
    tracked(child);
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  static start(args: string[], env: Record<string, string | undefined> = {}): AgentProcess {
    const child = spawn(process.execPath, [MAIN, ...args], {
      env: { PATH: process.env['PATH'], HOME: process.env['HOME'], ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return new AgentProcess(child);
  }

  private onData(text: string): void {
    this.raw += text;
    this.buffer += text;
    let nl: number;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + 1);
      let parsed: LogLine;
      try {
        parsed = JSON.parse(line) as LogLine;
      } catch {
        continue;
      }
      this.lines.push(parsed);
      this.waiters = this.waiters.filter((w) => {
        if (!w.pred(parsed)) return true;
        w.resolve(parsed);
        return false;
      });
    }
  }

  waitForLog(pred: (l: LogLine) => boolean, what: string, timeoutMs = 20_000): Promise<LogLine> {
    const seen = this.lines.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const t = setTimeout(
        () => reject(new Error(`timed out waiting for log "${what}"\nstdout:\n${this.raw.slice(-3000)}\nstderr:\n${this.stderr.slice(-2000)}`)),
        timeoutMs,
      );
      const stop = (): void => clearTimeout(t);
      this.exited.then(() => {
        stop();
        reject(new Error(`agent exited while waiting for "${what}"\nstdout:\n${this.raw.slice(-3000)}\nstderr:\n${this.stderr.slice(-2000)}`));
      }, stop);
      this.waiters.push({
        pred,
        resolve: (l) => {
          stop();
          resolve(l);
        },
      });
    });
  }

  /** The HTTP port the agent listens on (http.port 0 picks one). */
  async httpPort(): Promise<number> {
    const line = await this.waitForLog((l) => l.msg === 'HTTP listener up', 'HTTP listener up');
    return line['port'] as number;
  }

  async signal(sig: NodeJS.Signals): Promise<number | null> {
    if (this.child.exitCode !== null) return this.child.exitCode;
    this.child.kill(sig);
    return this.exited;
  }
}
