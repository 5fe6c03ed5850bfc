import { configJsonSchema } from '../../config/schema.js';
import { EXIT_OK, type CommandContext } from '../context.js';

export function schemaCommand(ctx: CommandContext): number {
  ctx.stdout(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
  return EXIT_OK;
}
