import { streamLogSink } from '../../platform/log-sink.js';
import { createLogger } from '../../platform/logger.js';
import { Simulator, SIM_DEFAULT_API_KEY, SIM_DEFAULT_WEBHOOK_SECRET } from '../../simulator/simulator.js';
import type { LoadedConfig } from '../../config/load.js';
import { intOption, numberOption, type ParsedArgs } from '../args.js';
import { EXIT_CONFIG, EXIT_OK, type CommandContext } from '../context.js';
import { loadForCommand } from '../load-config.js';

export const SIM_DEFAULT_PORT = 8090;

/** The webhook URL an agent with this config listens on, as seen from this machine. */
function webhookUrlOf(loaded: LoadedConfig): string | undefined {
  const c = loaded.config;
  if (!c.webhook.enabled) return undefined;
  const listen = c.webhook.host ?? c.http.host;
  const host = listen === '0.0.0.0' || listen === '::' ? '127.0.0.1' : listen;
  const scheme = c.webhook.port !== undefined && c.webhook.cert !== undefined ? 'https' : 'http';
  return `${scheme}://${host.includes(':') ? `[${host}]` : host}:${c.webhook.port ?? c.http.port}${c.webhook.path}`;
}

/**
 * Where the agent with this config expects its vendor: the simulator listens there when its
 * vendor.baseUrl is plain http on this machine, so one config serves both. Null otherwise (the
 * real cloud, or https), with the reason.
 */
export function listenOf(loaded: LoadedConfig | undefined): { host: string; port: number } | { why: string } | null {
  if (!loaded) return null;
  let url: URL;
  try {
    url = new URL(loaded.config.vendor.baseUrl);
  } catch {
    return null;
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const local = host === 'localhost' || host === '::1' || /^127\./.test(host);
  if (url.protocol !== 'http:' || !local) return { why: `vendor.baseUrl (${url.origin}) is not plain http on this machine` };
  return { host: host === 'localhost' ? '127.0.0.1' : host, port: url.port === '' ? 80 : Number(url.port) };
}

export async function simulateCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  const v = args.values;
  // A config is optional here: only read when given, so the simulator runs on a bare checkout.
  const explicit = args.config ?? ctx.env['CHAIR_AGENT_CONFIG'];
  const loaded = explicit ? await loadForCommand(explicit, ctx) : undefined;
  if (loaded === null) return EXIT_CONFIG;
  const fromConfig = listenOf(loaded ?? undefined);
  const where = fromConfig !== null && 'port' in fromConfig ? fromConfig : null;
  if (fromConfig !== null && 'why' in fromConfig && v['port'] === undefined) {
    ctx.stderr(`simulator: ${fromConfig.why}; listening on 127.0.0.1:${SIM_DEFAULT_PORT} (point vendor.baseUrl there to use it)\n`);
  }
  const port = intOption(v, 'port', 0, 65535) ?? where?.port ?? SIM_DEFAULT_PORT;
  const chairs = intOption(v, 'chairs', 1, 64) ?? 4;
  const minuteSeconds = numberOption(v, 'minute-seconds', 0.01) ?? 60;
  const apiKey = (v['api-key'] as string | undefined) ?? loaded?.config.vendor.apiKey ?? SIM_DEFAULT_API_KEY;
  const webhookUrl = (v['webhook-url'] as string | undefined) ?? (loaded ? webhookUrlOf(loaded) : undefined);
  const secret = (v['webhook-secret'] as string | undefined) ?? loaded?.config.webhook.channelSecret ?? SIM_DEFAULT_WEBHOOK_SECRET;
  // As `run` logs: a stdout that fails (a full disk) or stops reading never stops the simulator.
  const sink = ctx.logOutput ? streamLogSink(ctx.logOutput(), { reopen: ctx.logOutput }) : undefined;
  const logger = createLogger({ level: 'info', destination: sink, secrets: [apiKey, secret] }).child({ component: 'simulator' });
  const sim = new Simulator({
    host: (v['host'] as string | undefined) ?? where?.host ?? '127.0.0.1',
    port,
    apiKey,
    chairs,
    ...(typeof v['locations'] === 'string' ? { locations: v['locations'].split(',').map((l) => l.trim()).filter((l) => l !== '') } : {}),
    timeZone: (v['timezone'] as string | undefined) ?? loaded?.config.site.timezone ?? 'Asia/Bangkok',
    minuteMs: minuteSeconds * 1000,
    webhook: webhookUrl ? { url: webhookUrl, secret } : undefined,
    logger,
  });
  await sim.start();
  logger.info(
    { url: sim.url, chairs, webhookUrl: webhookUrl ?? null, apiKeyFromConfig: Boolean(loaded) },
    'vendor simulator listening',
  );
  if (!loaded && !v['api-key']) ctx.stderr(`simulator: Apikey is "${SIM_DEFAULT_API_KEY}" (use --api-key or --config to change)\n`);
  await new Promise<void>((resolve) => {
    if (ctx.signal.aborted) resolve();
    else ctx.signal.addEventListener('abort', () => resolve(), { once: true });
  });
  await sim.close();
  logger.flush();
  await sink?.flushed();
  sink?.close();
  return EXIT_OK;
}
