import { existsSync } from 'node:fs';
import { Outbox } from '../../store/outbox.js';
import { formatIsoWithOffset } from '../../time/vendor-time.js';
import { errorMessage } from '../../platform/errors.js';
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

/**
 * Backlog figures, read from the database while the agent runs (WAL lets both work).
 * --parked lists the records the broker refused, with why and when they are retried;
 * --retry-parked makes them due now (the running agent sends them within 10 minutes).
 */
export async function outboxCommand(args: ParsedArgs, ctx: CommandContext, now = Date.now()): Promise<number> {
  const loaded = await loadForCommand(args.config, ctx, args.verb);
  if (!loaded) return EXIT_CONFIG;
  const { config } = loaded;
  if (!existsSync(config.storage.path)) {
    ctx.stderr(`chair-agent: no database at ${config.storage.path} yet (storage.path); the agent creates it when it starts\n`);
    return EXIT_FAILURE;
  }
  const retry = args.values['retry-parked'] === true;
  const outbox = new Outbox({ path: config.storage.path, readonly: !retry });
  try {
    outbox.open();
    const tz = config.site.timezone;
    const iso = (t: number | null): string | null => (t === null ? null : formatIsoWithOffset(t, tz));
    if (retry) {
      const n = await outbox.parking.retryAllNow(now);
      ctx.stdout(`${n} parked record(s) made due now; the running agent sends them within 10 minutes\n`);
      return EXIT_OK;
    }
    const st = outbox.stats();
    const parked = args.values['parked'] === true ? outbox.parking.list(1000) : [];
    if (args.values['json'] === true) {
      const figures = { pending: st.pending, parked: st.parked, oldestPendingAt: iso(st.oldestPendingAt), delivered: st.delivered, lastDeliveryAt: iso(st.lastDeliveryAt) };
      const list = parked.map((p) => ({ ...p, parkedAt: iso(p.parkedAt), retryAt: iso(p.retryAt) }));
      ctx.stdout(`${JSON.stringify(args.values['parked'] === true ? { ...figures, parkedRecords: list } : figures)}\n`);
      return EXIT_OK;
    }
    const when = (t: number | null): string => (t === null ? '-' : `${formatIsoWithOffset(t, tz)} (${ago(now - t)})`);
    const lines = [
      `database:       ${config.storage.path}`,
      `waiting:        ${st.pending}${st.parked > 0 ? ` (${st.parked} parked: the broker refused them; see --parked)` : ''}`,
      `oldest waiting: ${when(st.oldestPendingAt)}`,
      `delivered:      ${st.delivered} (kept ${config.storage.retentionDays} days)`,
      `last delivery:  ${when(st.lastDeliveryAt)}`,
    ];
    for (const p of parked) {
      lines.push(`parked #${p.seq} ${p.transactionId} ${p.status} ${p.deviceId}: ${p.reason}; parked ${when(p.parkedAt)}, ${p.parkCount} time(s); retried at ${formatIsoWithOffset(p.retryAt, tz)}`);
    }
    ctx.stdout(`${lines.join('\n')}\n`);
    return EXIT_OK;
  } catch (err) {
    ctx.stderr(`chair-agent: cannot read ${config.storage.path}: ${errorMessage(err)}\n`);
    return EXIT_FAILURE;
  } finally {
    outbox.close();
  }
}
