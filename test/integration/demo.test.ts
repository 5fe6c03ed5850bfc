import { spawn, spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { renderView } from '../../agent/demo/view.js';
import { track } from '../helpers/agent-process.js';
import { MAIN } from '../helpers/cli.js';
import { Subscriber } from '../helpers/subscriber.js';
import { waitFor } from '../helpers/wait.js';

const hasScript = spawnSync('script', ['--version']).status === 0;
// The demo's terminal view writes ANSI escape sequences (ESC, a control character, is the point).
// eslint-disable-next-line no-control-regex
const strip = (s: string): string => s.replace(/\x1b\[[0-9;?]*[a-zA-Z]/g, '');

describe('chair-agent demo', () => {
  it('runs without a terminal: logs, can be watched over MQTT, pressed over HTTP and paid at the vendor, stops on SIGINT', async () => {
    const child = track(spawn(process.execPath, [MAIN, 'demo', '--minute-seconds', '60'], { stdio: ['ignore', 'pipe', 'pipe'] }));
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const watch = await waitFor(() => /mosquitto_sub -h 127\.0\.0\.1 -p (\d+) -V mqttv311 -t 'chair-agent\/#' -v/.exec(out), 'the watch line');
    const press = await waitFor(() => /curl -X POST (http:\/\/127\.0\.0\.1:\d+\/sim\/gpio\/17\/press)/.exec(out), 'the press line');
    const vendor = await waitFor(() => /demo: simulator (http:\/\/127\.0\.0\.1:\d+),/.exec(out), 'the simulator line');
    await waitFor(() => /demo: chair \[4\] {2}MC7004 .*steady: available/.test(out), 'the chairs printed as their lines change');
    expect(out).toContain('demo: time: real (a session minute is a minute)');
    const sub = await Subscriber.connect(`mqtt://127.0.0.1:${watch[1]}`, 'chair-agent/demo/#', { protocolVersion: 4 });
    await sub.waitFor((m) => m.topic === 'chair-agent/demo/chairs/MC7004' && m.retain, 'a retained chair state');
    expect((await fetch(press[1] as string, { method: 'POST' })).status).toBe(200);
    await sub.waitFor((m) => m.topic === 'chair-agent/demo/chairs/MC7001' && JSON.parse(m.text).running === true, 'MC7001 running');
    await sub.waitFor((m) => m.topic === 'chair-agent/demo/transactions/MC7001', 'the manual transaction');
    // A paid use at the vendor reaches the agent by the signed webhook, not only by the sync.
    const paid = (await (await fetch(`${vendor[1] as string}/sim/paid`, { method: 'POST', body: '{"minutes":5}' })).json()) as { TransactionId: string };
    await sub.waitFor((m) => m.topic.startsWith('chair-agent/demo/transactions/') && JSON.parse(m.text).TransactionId === paid.TransactionId, 'the paid use over MQTT');
    expect(out).toMatch(new RegExp(`"transactionId":"${paid.TransactionId}".*"msg":"transaction received by webhook"`));
    await sub.close();
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(out).toContain('demo stopped');
    expect(out).not.toContain('DeprecationWarning');
  });

  it.skipIf(!hasScript)('on a terminal: draws chairs and LEDs, and its keys press a button and make a paid use', async () => {
    // script(1) hands its command to a shell: quoted, a checkout under "My Projects" works too.
    const child = track(spawn('script', ['-qfec', `"${process.execPath}" "${MAIN}" demo --minute-seconds 60`, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'] }));
    let screen = '';
    child.stdout.on('data', (d: Buffer) => (screen += d.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const text = (): string => strip(screen);
    // A wait that times out says what the terminal showed by then.
    const shown = (what: string) => (): string => `${what}; the terminal's last output: ${JSON.stringify(text().slice(-1500))}`;
    await waitFor(() => text().includes('MC7004') && text().includes('steady: available'), shown('the chairs drawn'));
    child.stdin.write('1');
    await waitFor(() => text().includes('MC7001 started (5 min)'), shown('the start event'));
    await waitFor(() => /MC7001 +Running .*slow blink: running/.test(text()), shown('MC7001 running with its LED on slow blink'));
    child.stdin.write('p');
    await waitFor(() => /transaction \S+ playing MC700\d promptpay \S+ arrived over MQTT/.test(text()), shown('the paid use arriving'));
    child.stdin.write('q');
    expect(await exited).toBe(0);
    expect(text()).toContain('demo stopped');
  });

  it('draws the screen from a snapshot', () => {
    const lines = renderView({
      site: 'demo',
      vendor: { ok: true, cut: false, detail: '' },
      broker: { connected: false, down: true },
      backlog: { pending: 3, delivered: 7 },
      statusLed: 'slow',
      statusLedOn: true,
      chairs: [{ key: '1', deviceId: 'MC7001', status: 'Running', remainingSeconds: 125, seated: true, online: true, led: 'slow', ledOn: false }],
      events: ['12:00:00  something happened'],
      watch: 'mosquitto_sub ...',
      color: false,
      minuteSeconds: 2,
    });
    expect(lines[1]).toBe('vendor: reachable   broker: STOPPED (press b)   backlog: 3 waiting, 7 delivered');
    expect(lines[2]).toBe('status LED ● slow blink: broker unreachable, buffering');
    expect(lines[3]).toBe('time: sped up 30x (a session minute lasts 2 s; --minute-seconds 60 for real time)');
    expect(lines.find((l) => l.includes('MC7001'))).toBe(' [1]  MC7001    Running      2:05    yes     ○ slow blink: running');
    expect(lines).toContain('  12:00:00  something happened');
  });
});
