import { runDemo } from '../../demo/demo.js';
import { intOption, numberOption, type ParsedArgs } from '../args.js';
import { EXIT_OK, type CommandContext } from '../context.js';

export async function demoCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  const chairs = intOption(args.values, 'chairs', 1, 9) ?? 4;
  const minuteSeconds = numberOption(args.values, 'minute-seconds', 0.01) ?? 2;
  await runDemo({
    chairs,
    minuteSeconds,
    tty: ctx.stdin && ctx.stdoutIsTTY ? { input: ctx.stdin, write: ctx.stdout } : undefined,
    out: ctx.stdout,
    logOutput: ctx.logOutput,
    signal: ctx.signal,
  });
  return EXIT_OK;
}
