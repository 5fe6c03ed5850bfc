import type { LoadedConfig } from '../../config/load.js';
import { proxyFromEnvironment, type EnvProxy } from '../../config/proxy-env.js';
import { redactUrl } from '../../config/redact.js';
import type { ParsedArgs } from '../args.js';
import type { CommandContext } from '../context.js';
import { loadForCommand } from '../load-config.js';
import type { CheckLine } from './doctor.js';
import { serviceEnvironment } from './service-environment.js';

const PROXY_VARIABLES = ['https_proxy', 'HTTPS_PROXY', 'http_proxy', 'HTTP_PROXY', 'no_proxy', 'NO_PROXY'];

/** The vendor's proxy from this shell's environment and from the service's, where they differ. */
export interface ProxyDifference {
  own: EnvProxy | undefined;
  service: EnvProxy | undefined;
}

/**
 * Null where doctor and the service take the same proxy for the vendor (or the config names it,
 * which both take): doctor then checks with the environment it was given.
 */
export function proxyDifference(loaded: LoadedConfig, env: CommandContext['env'], serviceEnv: Readonly<Record<string, string>>): ProxyDifference | null {
  if (loaded.config.vendor.proxy !== undefined && loaded.proxyVariable === undefined) return null;
  const own = proxyFromEnvironment(loaded.config.vendor.baseUrl, env);
  const service = proxyFromEnvironment(loaded.config.vendor.baseUrl, serviceEnv);
  return own?.url === service?.url ? null : { own, service };
}

/** This shell's environment with the service's proxy variables in place of its own. */
export function withServiceProxy(env: CommandContext['env'], serviceEnv: Readonly<Record<string, string>>): CommandContext['env'] {
  const out: Record<string, string | undefined> = { ...env };
  for (const name of PROXY_VARIABLES) {
    if (serviceEnv[name] === undefined) delete out[name];
    else out[name] = serviceEnv[name];
  }
  return out;
}

/** Says which proxy the vendor was checked through, the service's, and what this shell had. */
export function proxyLine(d: ProxyDifference, vendorOk: boolean): CheckLine {
  const name = 'proxy';
  if (d.service) {
    const shell = d.own ? `, not this shell's ${d.own.variable} (${redactUrl(d.own.url)})` : '; this shell has none';
    return { name, ok: true, detail: `the vendor checked through the service's ${d.service.variable} (${redactUrl(d.service.url)}, from the environment systemd gives it)${shell}` };
  }
  const own = d.own as EnvProxy;
  return {
    name,
    ok: vendorOk,
    detail: `this shell's ${own.variable} (${redactUrl(own.url)}) is not the service's: systemd gives a service no login environment (/etc/environment, profiles, sudo), so the service reaches the vendor without it, and this check did too`,
    hint: `to give it to the service: sudo systemctl edit chair-agent, then [Service] and Environment=${own.variable.toUpperCase()}=${redactUrl(own.url)} (or vendor.proxy in the config); then sudo systemctl restart chair-agent`,
  };
}

/**
 * The config as the service reads it: where the proxy systemd gives the service differs from
 * this shell's, read again with the service's (doctor checks, and check prints, what the service
 * would use). Null where it does not load (its problems printed).
 */
export async function loadAsService(args: ParsedArgs, ctx: CommandContext): Promise<{ loaded: LoadedConfig; proxy: ProxyDifference | null } | null> {
  const loaded = await loadForCommand(args.config, ctx, args.verb);
  if (!loaded) return null;
  const serviceEnv = serviceEnvironment();
  const proxy = serviceEnv ? proxyDifference(loaded, ctx.env, serviceEnv) : null;
  if (!proxy || !serviceEnv) return { loaded, proxy: null };
  const again = await loadForCommand(args.config, { ...ctx, env: withServiceProxy(ctx.env, serviceEnv) }, args.verb);
  return again ? { loaded: again, proxy } : null;
}
