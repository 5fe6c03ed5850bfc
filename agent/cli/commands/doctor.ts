import { X509Certificate } from 'node:crypto';
import { accessSync, constants, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { MqttClient } from 'mqtt';
import { agentClientId } from '../../mqtt/broker-from-config.js';
import { brokerAddress, connectClient } from '../../mqtt/client-options.js';
import { brokerErrorText } from '../../mqtt/proxy-tunnel.js';
import { IDENTIFIER_FIX, isKeepaliveSuspect, keepaliveFix, shorterKeepalive } from '../../mqtt/keepalive-refusal.js';
import { buttonBias } from '../../gpio/gpio-from-config.js';
import { caStoreProblem, caStoreDetail } from '../../platform/system-trust.js';
import { loadAsService, proxyLine, type ProxyDifference } from './service-proxy.js';
import { vendorFromConfig } from '../../vendor/vendor-from-config.js';
import { systemClock } from '../../platform/clock.js';
import { redactUrl } from '../../config/redact.js';
import { DEFAULT_CONFIG_PATH } from '../../config/config-error.js';
import { failingStorage } from '../../store/failing-storage.js';
import { volatileStorage } from '../../store/volatile-storage.js';
import type { Config } from '../../config/schema.js';
import { parseVendorTime } from '../../time/vendor-time.js';
import { errorCode, errorMessage } from '../../platform/errors.js';
import { readTlsPair } from '../../platform/tls-files.js';
import { deviceClosedTo, unreadableBy, unwritableBy, worldReadable } from './service-user-access.js';
import { serviceIdentity, type ServiceIdentity } from './service-identity.js';
import { findHeaderBase, listChips } from '../../gpio/sysfs-chip.js';
import { loadGpiodBinding, type GpiodBinding } from '../../gpio/gpiod-binding.js';
import { CONSUMER, GpiodDriver } from '../../gpio/gpiod-driver.js';
import { configuredLines, overlayPins, readBootConfig } from '../../gpio/wiring.js';
import { silentLogger } from '../../platform/logger.js';
import { createLogger } from '../../platform/logger.js';
import { Outbox } from '../../store/outbox.js';
import { isVendorError } from '../../vendor/errors.js';
import type { ParsedArgs } from '../args.js';
import { EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, type CommandContext } from '../context.js';
import { configPath } from '../load-config.js';
import { secretValues } from '../secrets.js';
import { locationFilter } from '../../core/location.js';

export interface CheckLine {
  name: string;
  ok: boolean;
  detail: string;
  hint?: string;
}

export interface DoctorOptions {
  sysfsRoot?: string;
  brokerTimeoutMs?: number;
  /** The gpiod driver's kernel (a fake in tests) and where its chips are. */
  gpiod?: GpiodBinding;
  devDir?: string;
  /** Where the Pi's boot config may be. */
  bootConfigs?: readonly string[];
  /** Who the service runs as (null: no such account here); by default, as its unit says. */
  service?: ServiceIdentity | null;
  /** This shell's proxy for the vendor and the service's, where they differ (the config was read with the service's). */
  proxy?: ProxyDifference;
}

/**
 * The box's CA store, when the vendor's or the broker's TLS read it: a certificate in it that
 * OpenSSL cannot read is left out by the agent, but curl and Python on the box refuse the whole file.
 */
function caStoreCheck(): CheckLine[] {
  const problem = caStoreProblem();
  if (!problem) return [];
  const file = problem.files.length === 1 ? (problem.files[0] as string) : '<the file>';
  const named = problem.files.length > 0 ? problem.files.join(', ') : 'each .crt in /usr/local/share/ca-certificates';
  const convert = problem.notPem ? `; a DER one converts with sudo openssl x509 -inform der -in ${file} -out /tmp/ca.crt && sudo mv /tmp/ca.crt ${file}` : '';
  return [{ name: 'CA store', ok: false, detail: caStoreDetail(problem), hint: `${named} must hold PEM certificates only, or be removed${convert}; then sudo update-ca-certificates --fresh` }];
}

function databaseCheck(config: Config, service: ServiceIdentity | null): CheckLine {
  const line = databaseAccessCheck(config);
  if (!line.ok) return line;
  // First what would stop the service at every start, then what a power cut would take.
  const forService = service ? serviceDatabaseCheck(config.storage.path, service) : null;
  if (forService) return forService;
  const volatile = volatileStorage(config.storage.path);
  return volatile ? { name: line.name, ok: false, detail: `${line.detail}; but it is on ${volatile.fileSystem}, emptied by a power cut`, hint: volatile.advice } : line;
}

/**
 * The database as the service would open it: doctor, as root, writes anywhere, while the service
 * writes only where its user may and its sandbox lets it. A path out of its reach leaves the
 * service running without its database, every webhook answered 503, so it is said here.
 */
export function serviceDatabaseCheck(path: string, service: ServiceIdentity): CheckLine | null {
  if (path === ':memory:') return null;
  const dir = dirname(resolve(path));
  const problem = unwritableBy(dir, service, undefined, resolve(path));
  if (!problem) return null;
  const readOnly = problem.includes('read-only for the service');
  return {
    name: 'database',
    ok: false,
    detail: `storage.path ${path}: ${problem}; the service could store nothing (every webhook answered 503)`,
    hint: readOnly
      ? `keep the data in /var/lib/chair-agent (a disk mounted there: README, "Read-only root"), or let the service write ${dir}: sudo systemctl edit chair-agent, then [Service] ReadWritePaths=${dir}`
      : `sudo chown -R ${service.name}: ${dir}`,
  };
}

function databaseAccessCheck(config: Config): CheckLine {
  const path = config.storage.path;
  const name = 'database';
  // Before access(2): it says EROFS for a read-only mount (and the hint below would be chown), and
  // passes a file system the kernel stopped or shut down after a disk error.
  const storage = failingStorage(path);
  if (storage) return { name, ok: false, detail: `${path}: ${storage.summary}`, hint: storage.advice };
  if (!existsSync(path)) {
    const dir = dirname(path);
    try {
      accessSync(dir, constants.W_OK);
      return { name, ok: true, detail: `${path} does not exist yet; ${dir} is writable, the agent creates it on start` };
    } catch (err) {
      return {
        name,
        ok: false,
        detail: `${path} does not exist and ${dir} is not writable (${errorCode(err) ?? 'error'})`,
        hint: 'the unit creates /var/lib/chair-agent (StateDirectory=); elsewhere create the directory for the service user or change storage.path',
      };
    }
  }
  try {
    accessSync(path, constants.R_OK | constants.W_OK);
    accessSync(dirname(path), constants.W_OK); // WAL and shared-memory files live beside it
  } catch (err) {
    return {
      name,
      ok: false,
      detail: `${path} is not writable by this user (${errorCode(err) ?? 'error'})`,
      hint: 'run doctor as the service user (sudo -u chair-agent chair-agent doctor), or fix the owner: chown -R chair-agent: /var/lib/chair-agent',
    };
  }
  const outbox = new Outbox({ path, readonly: true });
  try {
    outbox.open();
    const integrity = outbox.database.integrityCheck();
    const st = outbox.stats();
    if (integrity !== 'ok') return { name, ok: false, detail: `${path}: integrity check says ${integrity}`, hint: 'stop the agent, keep a copy of the file, and see the troubleshooting section of the README' };
    return { name, ok: true, detail: `${path} writable; ${st.pending} transaction(s) waiting, ${st.delivered} delivered` };
  } catch (err) {
    return { name, ok: false, detail: `${path}: ${errorMessage(err)}`, hint: 'is it a chair-agent database? check storage.path' };
  } finally {
    outbox.close();
  }
}

async function vendorChecks(config: Config): Promise<CheckLine[]> {
  const logger = createLogger({ level: 'silent' });
  const vendor = vendorFromConfig(config, systemClock, logger);
  const name = 'vendor API';
  try {
    const list = await vendor.listChairs({ retries: 0 });
    const lines: CheckLine[] = [{ name, ok: true, detail: `${redactUrl(config.vendor.baseUrl)} answered with the key: ${list.chairs.length} chair(s) listed` }];
    const locations = new Map<string, number>();
    for (const c of list.chairs) locations.set(c.location ?? '(none)', (locations.get(c.location ?? '(none)') ?? 0) + 1);
    const seen = [...locations].map(([l, n]) => `${l} (${n})`).join(', ') || 'none';
    const filter = locationFilter(config.vendor.location);
    const here = filter ? list.chairs.filter(filter.chair) : list.chairs;
    if (!filter) lines.push({ name: 'locations', ok: true, detail: `the key sees: ${seen}${locations.size > 1 ? '; set vendor.location to keep one site' : ''}` });
    else if (here.length > 0) lines.push({ name: 'locations', ok: true, detail: `vendor.location keeps ${here.length} chair(s); the key sees: ${seen}` });
    else lines.push({ name: 'locations', ok: false, detail: `no chair at vendor.location "${config.vendor.location}"; the key sees: ${seen}`, hint: 'set vendor.location to one of the Locations listed' });
    const missing = config.gpio.chairs.map((c) => c.deviceId).filter((id) => !here.some((c) => c.deviceId === id));
    if (missing.length > 0) {
      lines.push({ name: 'chairs', ok: false, detail: `configured but not listed by the vendor: ${missing.join(', ')}`, hint: 'check gpio.chairs[].deviceId against the vendor list' });
    }
    const serverTime = list.chairs.find((c) => c.serverTime)?.serverTime;
    const vendorNow = serverTime ? parseVendorTime(serverTime, config.site.timezone) : null;
    if (vendorNow !== null) {
      const skew = Math.round((Date.now() - vendorNow) / 1000);
      lines.push(
        Math.abs(skew) <= 60
          ? { name: 'clock', ok: true, detail: `within ${Math.abs(skew)} s of the vendor's ServerTime (${config.site.timezone})` }
          : {
              name: 'clock',
              ok: false,
              detail: `${skew > 0 ? 'ahead of' : 'behind'} the vendor's ServerTime by ${Math.abs(skew)} s`,
              hint: 'a Pi has no battery clock: check time sync (timedatectl; systemd-timesyncd) and site.timezone',
            },
      );
    }
    return lines;
  } catch (err) {
    const code = isVendorError(err) ? err.code : 'error';
    const hints: Record<string, string> = {
      VENDOR_UNAUTHORIZED: 'the vendor refused the key: check /etc/chair-agent/credentials/vendor-api-key (or vendor.apiKey)',
      VENDOR_UNREACHABLE: /is not trusted \(/.test(errorMessage(err))
        ? `openssl s_client -connect ${new URL(config.vendor.baseUrl).host}${new URL(config.vendor.baseUrl).port ? '' : ':443'}${config.vendor.proxy ? ` -proxy ${new URL(config.vendor.proxy).host}` : ''} -showcerts shows who signed what the box is given; a CA of the site's goes in vendor.ca (PEM, readable by the service)`
        : config.vendor.proxy
        ? `check vendor.proxy (${redactUrl(config.vendor.proxy)}) and that it lets this box reach ${new URL(config.vendor.baseUrl).host}: curl -I -x <the proxy> <the base URL>`
        : 'check vendor.baseUrl, DNS and the uplink (curl -I the base URL from this box); a site that reaches the internet through a proxy sets vendor.proxy',
      VENDOR_TIMEOUT: 'the vendor is slow or the uplink drops packets; raise vendor.requestTimeoutSeconds if it persists',
      VENDOR_BAD_ENVELOPE: 'something answered that is not the vendor API: check vendor.baseUrl (and any proxy)',
      VENDOR_NOT_FOUND: 'the list endpoint is missing: check vendor.baseUrl (no trailing /api)',
    };
    return [{ name, ok: false, detail: `${redactUrl(config.vendor.baseUrl)}: ${errorMessage(err)}`, hint: hints[code] ?? 'check vendor.baseUrl and the uplink' }];
  } finally {
    await vendor.close();
  }
}

function brokerHint(message: string, config: Config): string {
  const proxy = config.mqtt.proxy;
  const { hostname, port } = brokerAddress(config.mqtt.url);
  const target = `${hostname.includes(':') ? `[${hostname}]` : hostname}:${port}`;
  const exempt = `ask the site's IT to exempt ${target} from TLS inspection (squid: acl broker ssl::server_name ${hostname}, then ssl_bump splice broker before its bump rule)`;
  if (proxy && /not trusted \(/.test(message)) return exempt;
  if (proxy && /^closed$|timed out|connack timeout/.test(message)) return `if the proxy's log shows the CONNECT accepted and then an error, it inspects TLS, which cannot carry MQTT: ${exempt}`;
  if (proxy && /^the proxy /.test(message)) {
    // curl's socks5h: the proxy resolves the name, as the agent has it do.
    const curl = proxy.startsWith('socks5:') ? `curl -v -x socks5h://<host:port of the proxy> telnet://${target}` : `curl -v -p -x <the proxy> telnet://${target}`;
    return `check mqtt.proxy (${redactUrl(proxy)}) and that it opens a tunnel to ${target}: ${curl}`;
  }
  // A box that reaches the vendor only through the site's proxy reaches a broker outside the site
  // only so too, and mqtt.proxy is never taken from the environment as vendor.proxy is.
  const outside = !proxy && config.vendor.proxy !== undefined && !/^(localhost|127\.|::1$)/.test(hostname);
  if (outside && /ENOTFOUND|EAI_AGAIN|ENETUNREACH|EHOSTUNREACH|timed out/.test(message))
    return `the vendor is reached through a proxy (vendor.proxy, or the environment's): a broker outside the site is reached only through one too, with mqtt.proxy (OPERATIONS.md, "Behind the site's proxy")`;
  if (/ECONNREFUSED/.test(message)) return 'nothing listens there: is Mosquitto running (systemctl status mosquitto)? check mqtt.url host and port';
  if (/ENOTFOUND|EAI_AGAIN/.test(message)) return 'the broker host name does not resolve: check mqtt.url';
  if (/Not authorized|Bad username or password|not authorised/i.test(message))
    return `the broker refused the login: check mqtt.username and the credential mqtt-password, and that the broker admits the client id ${agentClientId(config)}-doctor (Mosquitto's clientid_prefixes admits the agent's prefix)`;
  if (/certificate|self.signed|SSL|TLS/i.test(message)) return 'TLS failed: check mqtt.ca (the CA of the broker certificate), mqtt.cert/key, or the host name in mqtt.url';
  if (/protocol|Unsupported/i.test(message) && config.mqtt.protocolVersion === 5) return 'the broker may not speak MQTT 5: set mqtt.protocolVersion: 4';
  if (/timed out/.test(message)) return 'no answer: a firewall, or a wrong port (mqtts is usually 8883)';
  return 'check mqtt.url and the broker log';
}

/**
 * What the running agent told the broker about refused publishes (its retained bridge/info):
 * refusals are counted by topic class, and retained topics held back are named with the reason.
 */
function refusalLine(info: unknown, config: Config, agentOnline = false): CheckLine {
  const name = 'refusals';
  if (info === null && agentOnline) {
    return {
      name,
      ok: false,
      detail: 'the agent is online (bridge/state) but its retained bridge/info is not on the broker: the broker refuses it',
      hint: `allow the agent's user to publish under ${config.mqtt.baseTopic}/${config.site.id}/# in the broker's ACL, and keep its message size limit above a few KB (Mosquitto: message_size_limit)`,
    };
  }
  const refused = (info as { refused?: { total?: number; byClass?: Record<string, number>; held?: { topic: string; reason: string }[]; heldOmitted?: number } } | null)?.refused;
  if (!refused || typeof refused.total !== 'number') return { name, ok: true, detail: 'no report from a running agent on this broker yet (bridge/info)' };
  if (refused.total === 0) return { name, ok: true, detail: 'the running agent reports no publish refused by the broker' };
  const classes = Object.entries(refused.byClass ?? {}).map(([c, n]) => `${c} ${n}`).join(', ');
  const listed = refused.held ?? [];
  // A short bridge/info (the broker's size limit) names one and counts the rest.
  const more = Math.max(0, listed.length - 3) + (typeof refused.heldOmitted === 'number' ? refused.heldOmitted : 0);
  const held = listed.slice(0, 3).map((h) => `${h.topic} (${h.reason})`).join('; ') + (more > 0 ? `; and ${more} more` : '');
  // Nothing held: each was taken since (in a smaller form, or at its retry), or was a record, which the outbox reports.
  if (!held) return { name, ok: true, detail: `the broker refused ${refused.total} publish(es): ${classes}; none is held back now` };
  return {
    name,
    ok: false,
    detail: `the broker refused ${refused.total} publish(es): ${classes}; held back: ${held}`,
    hint: `let the agent's user publish under ${config.mqtt.baseTopic}/${config.site.id}/# ${config.homeassistant.enabled ? `and ${config.homeassistant.discoveryPrefix}/# ` : ''}in the broker's ACL, and raise its message size limit if the reason is "Packet too large"`,
  };
}

/**
 * Connects as the agent does, with its keepalive. Refused in a way a extra keepalive may get
 * past (MQTT 3.1.1 and a broker's max_keepalive: keepalive-refusal.ts), it tries extra ones as
 * the agent does, and says which the broker took.
 */
/**
 * Whether the agent on this box is running and on its broker, by its /healthz: asked before
 * doctor connects, because a broker that gives each login the client id of its user name
 * (Mosquitto's use_username_as_clientid) ends the agent's session when doctor connects.
 */
async function agentOnBroker(config: Config): Promise<boolean> {
  const host = config.http.host === '0.0.0.0' || config.http.host === '::' ? '127.0.0.1' : config.http.host;
  try {
    const res = await fetch(`http://${host.includes(':') ? `[${host}]` : host}:${config.http.port}/healthz`, { signal: AbortSignal.timeout(1_000) });
    const body = (await res.json()) as { checks?: { broker?: { ok?: unknown } } };
    return body.checks?.broker?.ok === true;
  } catch {
    return false;
  }
}

/** What doctor's own connection did to a running agent whose client id the broker replaces. */
function takeoverLine(config: Config): CheckLine {
  return {
    name: 'clientid',
    ok: false,
    detail: `the agent was on the broker, and this check's connection ended its session (its will said offline): the broker gives each login the client id of its user name (Mosquitto: use_username_as_clientid), so every doctor run takes the agent off the broker for a moment, and Home Assistant shows the chairs unavailable meanwhile`,
    hint: `the agent reconnects by itself; turn use_username_as_clientid off for ${config.mqtt.username ? `the user "${config.mqtt.username}"` : "the agent's user"}, or stop the service while doctor runs (sudo systemctl stop chair-agent)`,
  };
}

function brokerCheck(config: Config, timeoutMs: number, keepalive = config.mqtt.keepaliveSeconds, agentWasOn = false): Promise<CheckLine[]> {
  const m = config.mqtt;
  const name = 'broker';
  const where = redactUrl(m.url);
  const infoTopic = `${m.baseTopic}/${config.site.id}/bridge/info`;
  const stateTopic = `${m.baseTopic}/${config.site.id}/bridge/state`;
  let online = false;
  /** The agent was on the broker, and its state said offline once doctor was connected. */
  let tookItsSession = false;
  let accepted: CheckLine[] | null = null;
  return new Promise((resolve) => {
    let client: MqttClient;
    try {
      // The agent's id and a suffix: a broker that admits client ids by prefix (Mosquitto's
      // clientid_prefixes) admits doctor as it admits the agent, and the two never collide.
      client = connectClient(m, { clientId: `${agentClientId(config)}-doctor`, keepaliveSeconds: keepalive, connectTimeoutMs: timeoutMs });
    } catch (err) {
      resolve([{ name, ok: false, detail: `${where}: ${errorMessage(err)}`, hint: 'check mqtt.ca, mqtt.cert and mqtt.key' }]);
      return;
    }
    let done = false;
    let infoTimer: NodeJS.Timeout | undefined;
    const finish = (lines: CheckLine[] | Promise<CheckLine[]>): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(infoTimer);
      client.end(true);
      resolve(lines);
    };
    const timer = setTimeout(() => finish([{ name, ok: false, detail: `${where}: timed out after ${timeoutMs} ms`, hint: brokerHint('timed out', config) }]), timeoutMs + 500);
    client.on('connect', (connack) => {
      const v311 = m.protocolVersion !== 5;
      const ok: CheckLine = {
        name,
        ok: true,
        detail: `${where} accepted the connection (MQTT ${v311 ? '3.1.1: a broker cannot refuse a publish in it, so what its ACL or size limit drops is acknowledged and goes unseen; mqtt.protocolVersion: 5 detects it' : '5'})`,
      };
      const extra: CheckLine[] =
        keepalive === m.keepaliveSeconds
          ? []
          : [{ name: 'keepalive', ok: false, detail: `the broker refused a keepalive of ${m.keepaliveSeconds} s ("Identifier rejected") and accepted ${keepalive} s: the agent steps down to it by itself, and says so in its log`, hint: keepaliveFix(m.keepaliveSeconds, keepalive) }];
      // The broker's policy, not a fault: the agent does without retain there (mqtt-broker.ts).
      if (connack.properties?.retainAvailable === false)
        extra.push({ name: 'retain', ok: true, detail: 'the broker keeps no retained messages (Mosquitto: retain_available false): the agent publishes its state, availability and discovery without retain, so a subscriber sees each at its next change' });
      accepted = [ok, ...extra];
      const taken = (): CheckLine[] => (tookItsSession ? [takeoverLine(config)] : []);
      // The agent's own report, when one runs against this broker (retained, so it comes at once).
      infoTimer = setTimeout(() => finish([ok, ...extra, refusalLine(null, config, online), ...taken()]), 1_500);
      client.on('message', (topic, payload) => {
        if (topic === stateTopic) {
          online = payload.toString().includes('"online"');
          if (agentWasOn && !online) tookItsSession = true;
        }
        if (topic !== infoTopic) return;
        let info: unknown = null;
        try {
          info = JSON.parse(payload.toString());
        } catch {
          // not a report we can read
        }
        finish([ok, ...extra, refusalLine(info, config), ...taken()]);
      });
      client.subscribe([stateTopic, infoTopic], { qos: 0 }, (err) => {
        if (err) finish([ok, ...extra, refusalLine(null, config)]);
      });
    });
    client.on('error', (err) => {
      if (!isKeepaliveSuspect(err, m.protocolVersion)) {
        const text = brokerErrorText(err, m.proxy);
        finish([{ name, ok: false, detail: `${where}: ${text}`, hint: brokerHint(text, config) }]);
        return;
      }
      const next = shorterKeepalive(keepalive);
      if (next !== undefined) finish(brokerCheck(config, timeoutMs, next, agentWasOn));
      else finish([{ name, ok: false, detail: `${where}: ${errorMessage(err)} at every keepalive from ${m.keepaliveSeconds} s down to ${keepalive} s`, hint: IDENTIFIER_FIX }]);
    });
    client.on('close', () => {
      // Accepted, then closed: a running agent whose client id the broker replaces took its session back.
      if (accepted && agentWasOn) finish([...accepted, takeoverLine(config)]);
      else if (accepted) finish([...accepted, { name: 'broker', ok: false, detail: `${where}: the broker closed the connection it had accepted`, hint: 'check the broker log' }]);
      else finish([{ name, ok: false, detail: `${where}: the connection was closed before the broker accepted it`, hint: brokerHint('closed', config) }]);
    });
  });
}

/**
 * The GPIO character device: the chips can be opened, every configured line is found by its name,
 * a free button line accepts its bias, and a line someone else holds is named. Never a line the
 * running agent holds: those are reported as held by the service.
 */
async function gpiodChecks(config: Config, options: DoctorOptions): Promise<CheckLine[]> {
  const name = 'gpio';
  const driver = new GpiodDriver({ logger: silentLogger(), bias: buttonBias(config), ...(options.gpiod ? { binding: options.gpiod } : {}), ...(options.devDir ? { devDir: options.devDir } : {}) });
  try {
    await driver.init();
  } catch (err) {
    const code = errorCode(err);
    const hint =
      code === 'GPIO_PERMISSION'
        ? 'sudo usermod -aG gpio chair-agent; the unit has DeviceAllow=char-gpiochip rw (run doctor with sudo to check as root)'
        : code === 'GPIO_UNAVAILABLE' && errorMessage(err).includes('addon')
          ? 'reinstall the package (the addon is in /opt/chair-agent/app/native)'
          : 'on a Raspberry Pi OS kernel /dev/gpiochip* is there; elsewhere use gpio.driver: sim';
    return [{ name, ok: false, detail: errorMessage(err), hint }];
  }
  const chips = driver.listChips();
  const out: CheckLine[] = [{ name, ok: true, detail: `character device readable: ${chips.map((c) => `${c.name} [${c.label}]`).join(', ')}` }];
  const binding = options.gpiod ?? loadGpiodBinding();
  for (const l of configuredLines(config)) {
    const what = `${l.role === 'status LED' ? 'status LED' : `${l.owner} ${l.role}`}, BCM ${l.bcm}`;
    const ref = driver.resolve(l.bcm);
    if (!ref) {
      out.push({ name, ok: false, detail: `${what}: no line named GPIO${l.bcm} and no Raspberry Pi header chip`, hint: 'is this a Raspberry Pi? gpioinfo lists the lines' });
      continue;
    }
    const where = `${ref.chip.name} line ${ref.offset}${ref.name ? ` (${ref.name})` : ''}${ref.found === 'name' ? '' : ', the header chip\'s line of that number'}`;
    let info;
    try {
      info = binding.lineInfo(ref.chip.path, ref.offset);
    } catch (err) {
      out.push({ name, ok: false, detail: `${what} = ${where}: ${errorMessage(err)}`, hint: 'see gpioinfo' });
      continue;
    }
    if (info.used && info.consumer === CONSUMER) {
      out.push({ name, ok: true, detail: `${what} = ${where}: held by the chair-agent service` });
      continue;
    }
    if (info.used) {
      out.push({ name, ok: false, detail: `${what} = ${where}: used by "${info.consumer || 'another driver'}"`, hint: 'an overlay or program holds it: pick another pin, or remove the overlay from /boot/firmware/config.txt' });
      continue;
    }
    if (l.role !== 'button') {
      out.push({ name, ok: true, detail: `${what} = ${where}: free` });
      continue;
    }
    const bias = buttonBias(config);
    try {
      const fd = binding.request(ref.chip.path, ref.offset, { consumer: CONSUMER, direction: 'input', activeLow: config.gpio.activeLow, bias, edge: 'both', debounceUs: config.gpio.debounceMs * 1000 });
      binding.release(fd);
      out.push({ name, ok: true, detail: `${what} = ${where}: free; bias ${bias} and ${config.gpio.debounceMs} ms debounce accepted` });
    } catch (err) {
      out.push({
        name,
        ok: false,
        detail: `${what} = ${where}: the kernel refused it as a button (${errorMessage(err)})`,
        hint: errorCode(err) === 'EINVAL' ? 'bias or debounce not supported: a kernel older than 5.10? set gpio.bias: as-is and add a resistor' : 'see gpioinfo',
      });
    }
  }
  // Root opened the chips above; the service opens them as chair-agent (group gpio), which only
  // a udev rule makes possible where the distribution leaves them root's (Debian, Ubuntu).
  const service = options.service;
  const used = [...new Set(configuredLines(config).map((l) => driver.resolve(l.bcm)?.chip.path).filter((p): p is string => p !== undefined))];
  for (const path of service ? used : []) {
    const closed = deviceClosedTo(path, service as ServiceIdentity);
    if (closed) {
      out.push({ name, ok: false, detail: `${closed}, the service's user: its buttons and LEDs would not work`, hint: 'the package\'s udev rule (60-chair-agent-gpio.rules) gives /dev/gpiochip* to group gpio: sudo udevadm trigger --subsystem-match=gpio, or reboot; ls -l /dev/gpiochip* shows it' });
    }
  }
  return out;
}

/** Pins of interfaces enabled in the Pi's boot config that a button or LED is configured on. */
function overlayCheck(config: Config, bootConfigs: readonly string[] | undefined): CheckLine[] {
  const boot = readBootConfig(bootConfigs);
  if (!boot) return [];
  const taken = overlayPins(boot.text);
  const clashes = configuredLines(config).flatMap((l) =>
    taken.filter((t) => t.pins.includes(l.bcm)).map((t) => `BCM ${l.bcm} (${l.role === 'status LED' ? 'status LED' : `${l.owner} ${l.role}`}) is taken by ${t.what}, line ${t.line}`),
  );
  if (clashes.length === 0) {
    return [{ name: 'overlays', ok: true, detail: `no configured pin is claimed by an interface enabled in ${boot.path} (${taken.map((t) => t.what.split(' ')[0]).join(', ') || 'none enabled'})` }];
  }
  return [{ name: 'overlays', ok: false, detail: `${clashes.join('; ')} in ${boot.path}`, hint: 'pick other pins (README: Wiring), or disable that interface in the boot config and reboot' }];
}

/** sysfs GPIO as far as it can be checked without touching a line the running agent may hold. */
function gpioCheck(config: Config, sysfsRoot: string): CheckLine {
  const name = 'gpio';
  const pins = [
    ...(config.gpio.statusLed === undefined ? [] : [config.gpio.statusLed]),
    ...config.gpio.chairs.flatMap((c) => [c.button, c.led].filter((p): p is number => p !== undefined)),
  ];
  if (pins.length === 0) return { name, ok: true, detail: 'no GPIO lines configured' };
  if (config.gpio.driver === 'sim') return { name, ok: true, detail: `sim driver: ${pins.length} simulated line(s), no hardware used` };
  const exportFile = join(sysfsRoot, 'export');
  if (!existsSync(exportFile)) {
    return { name, ok: false, detail: `no sysfs GPIO on this machine (${exportFile} is missing)`, hint: 'on a Raspberry Pi OS kernel it is there; elsewhere use gpio.driver: sim' };
  }
  try {
    accessSync(exportFile, constants.W_OK);
  } catch {
    return { name, ok: false, detail: `${exportFile} is not writable by this user (EACCES)`, hint: 'the service user must be in the gpio group: sudo usermod -aG gpio chair-agent (the installer does)' };
  }
  const found = config.gpio.chipBase === undefined ? findHeaderBase(sysfsRoot) : null;
  const base = config.gpio.chipBase ?? found?.base;
  if (base === undefined) {
    return { name, ok: false, detail: `no gpiochip under ${sysfsRoot}`, hint: 'set gpio.chipBase (the sysfs number of BCM 0)' };
  }
  const chip = config.gpio.chipBase === undefined ? listChips(sysfsRoot).find((c) => c.base === base) : undefined;
  const outside = chip ? pins.filter((p) => p >= chip.ngpio) : [];
  if (outside.length > 0) return { name, ok: false, detail: `BCM ${outside.join(', ')} beyond ${chip?.name} (${chip?.ngpio} lines)`, hint: 'check the pin numbers (BCM, as printed on the pinout)' };
  const from = found ? `${found.chip.name} (${found.chip.label})` : 'gpio.chipBase';
  return { name, ok: true, detail: `sysfs writable; BCM 0 is sysfs ${base} (${from}); ${pins.length} line(s): BCM ${pins.join(', ')}` };
}

/** doctor's GPIO lines: the driver's own checks, then the boot config's interfaces. */
export async function gpioDoctorLines(config: Config, options: DoctorOptions = {}): Promise<CheckLine[]> {
  const lines: CheckLine[] = [];
  if (config.gpio.driver === 'gpiod' && configuredLines(config).length > 0) lines.push(...(await gpiodChecks(config, options)));
  else lines.push(gpioCheck(config, options.sysfsRoot ?? '/sys/class/gpio'));
  if (config.gpio.driver !== 'sim') lines.push(...overlayCheck(config, options.bootConfigs));
  return lines;
}

/**
 * The certificate the webhook port serves: whom it names, so the installer can hold that against
 * the URL given to the vendor, and when it expires. Within two weeks of that a renewal has failed.
 */
export function webhookCertificateCheck(config: Config, now = Date.now(), service: ServiceIdentity | null = null): CheckLine[] {
  const { enabled, port, cert, key } = config.webhook;
  if (!enabled || port === undefined || cert === undefined || key === undefined) return [];
  const name = 'https';
  const install = 'install -o root -g chair-agent -m 0640 (OPERATIONS.md, "HTTPS on that port")';
  if (worldReadable(key)) return [{ name, ok: false, detail: `webhook.key: ${key} is readable by every user on this box`, hint: `chmod 0640 it, group chair-agent: ${install}` }];
  // doctor runs as root; the service does not, and keeps the webhook port closed on a file it cannot read.
  const unreachable = service ? (unreadableBy(cert, service) ?? unreadableBy(key, service)) : null;
  if (unreachable) return [{ name, ok: false, detail: `${unreachable}, the service's user: its webhook port would stay closed`, hint: install }];
  try {
    const pair = readTlsPair({ cert, key }, { cert: 'webhook.cert', key: 'webhook.key' });
    const x509 = new X509Certificate(pair.cert);
    const names = x509.subjectAltName?.replace(/DNS:|IP Address:/g, '') ?? x509.subject;
    const days = Math.floor((pair.notAfter - now) / 86_400_000);
    const expires = new Date(pair.notAfter).toISOString().slice(0, 10);
    if (days < 14) {
      return [{ name, ok: false, detail: `port ${port}: ${names}; ${days < 0 ? `expired on ${expires}` : `expires on ${expires}, in ${days} day(s)`}`, hint: `renew it and copy it to ${cert}; the agent picks it up within a minute` }];
    }
    return [{ name, ok: true, detail: `port ${port}: ${names}; expires on ${expires}, in ${days} days` }];
  } catch (err) {
    return [{ name, ok: false, detail: errorMessage(err), hint: 'see OPERATIONS.md, "HTTPS on that port"' }];
  }
}

/**
 * The files the service reads at start, read as the service: its config (the unit's, when that is
 * the one checked), vendor.ca and the broker's TLS files. A config out of its reach stops it with exit 78,
 * which systemd does not restart; a broker file keeps it off the broker (records wait on disk).
 * Every command run as root finds them fine.
 */
export function serviceFilesCheck(config: Config, path: string, service: ServiceIdentity | null): CheckLine[] {
  if (!service) return [];
  const name = 'access';
  const files: [string, string | undefined][] = [
    ['config', resolve(path) === DEFAULT_CONFIG_PATH ? path : undefined],
    ['vendor.ca', config.vendor.ca],
    ['mqtt.ca', config.mqtt.ca],
    ['mqtt.cert', config.mqtt.cert],
    ['mqtt.key', config.mqtt.key],
  ];
  const read = files.filter((f): f is [string, string] => f[1] !== undefined);
  const hint = `install -o root -g ${service.name} -m 0640 it, or put ${service.name} in the file's group (OPERATIONS.md, "Files the service reads")`;
  for (const [key, file] of read) {
    const problem = unreadableBy(file, service);
    const cost =
      key === 'config'
        ? 'the service would stop at start (exit 78)'
        : key === 'vendor.ca'
          ? "the service would not trust the vendor's certificate through the site's inspecting proxy"
          : 'the service would run without the broker, its records waiting on disk';
    if (problem) return [{ name, ok: false, detail: `${key}: ${problem}, the service's user: ${cost}`, hint }];
  }
  const key = config.mqtt.key;
  if (key !== undefined && worldReadable(key)) return [{ name, ok: false, detail: `mqtt.key: ${key} is readable by every user on this box`, hint }];
  if (read.length === 0) return [];
  return [{ name, ok: true, detail: `${service.name} reads ${read.map(([k, file]) => `${k} (${file})`).join(', ')}` }];
}

export async function runDoctor(config: Config, path: string, options: DoctorOptions = {}): Promise<CheckLine[]> {
  const lines: CheckLine[] = [{ name: 'config', ok: true, detail: `${path} valid (site ${config.site.id})` }];
  const service = options.service === undefined ? serviceIdentity() : options.service;
  lines.push(...serviceFilesCheck(config, path, service));
  lines.push(...webhookCertificateCheck(config, Date.now(), service));
  lines.push(databaseCheck(config, service));
  const agentWasOn = await agentOnBroker(config);
  const [vendor, broker] = await Promise.all([vendorChecks(config), brokerCheck(config, options.brokerTimeoutMs ?? 5_000, config.mqtt.keepaliveSeconds, agentWasOn)]);
  if (options.proxy) lines.push(proxyLine(options.proxy, vendor[0]?.ok ?? false));
  lines.push(...vendor, ...broker, ...caStoreCheck());
  lines.push(...(await gpioDoctorLines(config, { ...options, service })));
  return lines;
}

export function formatCheck(line: CheckLine): string {
  return `${line.ok ? 'ok  ' : 'FAIL'}  ${line.name.padEnd(10)}  ${line.detail}${line.hint ? `\n            hint: ${line.hint}` : ''}`;
}

export async function doctorCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  const path = configPath(args.config, ctx.env);
  // The vendor is checked through the proxy the service takes from its environment, not this
  // shell's (service-proxy.ts).
  const read = await loadAsService(args, ctx);
  if (!read) {
    ctx.stdout(`${formatCheck({ name: 'config', ok: false, detail: `${path} is not valid (the problems are above)`, hint: 'fix them; chair-agent check --config FILE shows the result' })}\n`);
    return EXIT_CONFIG;
  }
  const { loaded, proxy } = read;
  const lines = await runDoctor(loaded.config, path, proxy ? { proxy } : {});
  // Whatever a library put in a message, no secret leaves here.
  const secrets = secretValues(loaded.config).filter((s) => s.length >= 4);
  const text = lines.map(formatCheck).join('\n');
  ctx.stdout(`${secrets.reduce((t, s) => t.split(s).join('********'), text)}\n`);
  return lines.every((l) => l.ok) ? EXIT_OK : EXIT_FAILURE;
}
