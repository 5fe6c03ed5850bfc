import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitForPort } from './ports.js';

const BIN = '/usr/lib/rabbitmq/bin';

/**
 * A RabbitMQ node of its own (Debian's rabbitmq-server, the MQTT plugin) for the fleet test: its
 * own node name, Erlang distribution and epmd ports, data and cookie under a temporary directory,
 * so it neither needs nor touches the system's service. MQTT over TLS only, the client
 * certificate's CN as the user name (mqtt.ssl_cert_login), no anonymous clients.
 */
export class TestRabbit {
  private constructor(
    readonly port: number,
    private readonly env: NodeJS.ProcessEnv,
    private readonly node: string,
    private readonly proc: ChildProcess,
    readonly log: string[],
  ) {}

  static async start(certs: { ca: string; cert: string; key: string }): Promise<TestRabbit> {
    const dir = mkdtempSync(join(tmpdir(), 'rabbit-'));
    mkdirSync(join(dir, 'home'));
    const port = await freePort();
    const node = `chairtest${port}@localhost`;
    writeFileSync(
      join(dir, 'rabbitmq.conf'),
      [
        'listeners.tcp = none',
        'mqtt.listeners.tcp = none',
        `mqtt.listeners.ssl.default = 127.0.0.1:${port}`,
        `ssl_options.cacertfile = ${certs.ca}`,
        `ssl_options.certfile = ${certs.cert}`,
        `ssl_options.keyfile = ${certs.key}`,
        'ssl_options.verify = verify_peer',
        'ssl_options.fail_if_no_peer_cert = true',
        'mqtt.ssl_cert_login = true',
        'ssl_cert_login_from = common_name',
        'mqtt.allow_anonymous = false',
        'mqtt.vhost = /',
        'mqtt.exchange = amq.topic',
        '',
      ].join('\n'),
    );
    writeFileSync(join(dir, 'enabled_plugins'), '[rabbitmq_mqtt].\n');
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      HOME: join(dir, 'home'),
      RABBITMQ_NODENAME: node,
      RABBITMQ_CONFIG_FILE: join(dir, 'rabbitmq'),
      RABBITMQ_ENABLED_PLUGINS_FILE: join(dir, 'enabled_plugins'),
      RABBITMQ_MNESIA_BASE: join(dir, 'mnesia'),
      RABBITMQ_LOG_BASE: join(dir, 'log'),
      RABBITMQ_LOGS: '-',
      RABBITMQ_PID_FILE: join(dir, 'pid'),
      RABBITMQ_DIST_PORT: String(await freePort()),
      ERL_EPMD_PORT: String(await freePort()),
    };
    const log: string[] = [];
    const proc = spawn(join(BIN, 'rabbitmq-server'), [], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    for (const s of [proc.stdout, proc.stderr]) s?.on('data', (d: Buffer) => log.push(...d.toString().split('\n').filter(Boolean)));
    const rabbit = new TestRabbit(port, env, node, proc, log);
    try {
      // Erlang boots in seconds; the MQTT listener opens near the end, but the node reports the
      // rabbit app as running only once its boot has finished, and rabbitmqctl refuses until then.
      // Under a loaded CI the boot has run past 60 s after the port opened, still syncing its
      // Mnesia tables: the wait ends as soon as the node is up, so its bound costs nothing.
      await waitForPort(port, 60_000);
      rabbit.ctl('await_startup', '--timeout', '120');
    } catch (err) {
      await rabbit.stop();
      throw new Error(`${String(err)}\nrabbitmq said:\n${log.slice(-20).join('\n')}`);
    }
    return rabbit;
  }

  /** rabbitmqctl against this node; throws with its output when it fails. */
  ctl(...args: string[]): string {
    const r = spawnSync(join(BIN, 'rabbitmqctl'), ['-n', this.node, ...args], { env: this.env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`rabbitmqctl ${args.join(' ')}: ${r.stderr || r.stdout}`);
    return r.stdout;
  }

  /** A user that logs in only by its certificate (no password). */
  addCertUser(name: string): void {
    this.ctl('add_user', name, `unused-${Math.random().toString(36).slice(2)}`);
    this.ctl('clear_password', name);
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.proc.once('exit', () => resolve()));
    spawnSync(join(BIN, 'rabbitmqctl'), ['-n', this.node, 'stop'], { env: this.env, timeout: 30_000 });
    try {
      process.kill(-(this.proc.pid as number), 'SIGKILL');
    } catch {
      // already gone
    }
    await exited;
    // The node's own epmd stays up otherwise.
    spawnSync('sh', ['-c', `ERL_EPMD_PORT=${this.env['ERL_EPMD_PORT']} epmd -kill`], { stdio: 'ignore' });
  }
}
