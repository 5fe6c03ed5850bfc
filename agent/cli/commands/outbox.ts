import { existsSync } from 'node:fs';
import { Outbox } from '../../store/outbox.js';
import { formatIsoWithOffset } from '../../core/vendor-time.js';
import { errorMessage } from '../../errors.js';
import type { ParsedArgs } from '../args.js';
import { EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, type CommandContext } from '../context.js';
import { loadForCommand } from '../load-config.js';

function ago(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s} s ago`;
  if (s < 7200) return `${Math.round(s / 60)} min ago`;
  if (s < 172_800) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86_400)} days ago`;
}

/** Backlog figures, read from the database while the agent runs (WAL lets both work). */
export function outboxCommand(args: ParsedArgs, ctx: CommandContext, now = Date.now()): number {
  const loaded = loadForCommand(args.config, ctx, args.verb);
  if (!loaded) return EXIT_CONFIG;
  const { config } = loaded;
  if (!existsSync(config.storage.path)) {
    ctx.stderr(`chair-agent: no database at ${config.storage.path} yet (storage.path); the agent creates it when it starts\n`);
    return EXIT_FAILURE;
  }
  const outbox = new Outbox({ path: config.storage.path, readonly: true });
  try {
    outbox.open();
    const st = outbox.stats();
    const tz = config.site.timezone;
    if (args.values['json'] === true) {
      ctx.stdout(
        `${JSON.stringify({
          pending: st.pending,
          oldestPendingAt: st.oldestPendingAt === null ? null : formatIsoWithOffset(st.oldestPendingAt, tz),
          delivered: st.delivered,
          lastDeliveryAt: st.lastDeliveryAt === null ? null : formatIsoWithOffset(st.lastDeliveryAt, tz),
        })}\n`,
      );
      return EXIT_OK;
    }
    const when = (t: number | null): string => (t === null ? '-' : `${formatIsoWithOffset(t, tz)} (${ago(now - t)})`);
    ctx.stdout(
      [
        `database:       ${config.storage.path}`,
        `waiting:        ${st.pending}`,
        `oldest waiting: ${when(st.oldestPendingAt)}`,
        `delivered:      ${st.delivered} (kept ${config.storage.retentionDays} days)`,
        `last delivery:  ${when(st.lastDeliveryAt)}`,
        '',
      ].join('\n'),
    );
    return EXIT_OK;
  } catch (err) {
    ctx.stderr(`chair-agent: cannot read ${config.storage.path}: ${errorMessage(err)}\n`);
    return EXIT_FAILURE;
  } finally {
    outbox.close();
  }
}
