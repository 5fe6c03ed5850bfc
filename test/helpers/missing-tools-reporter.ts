import type { Reporter, TestModule } from 'vitest/node';
import { has, type Tool } from './tool-detect.js';

/** How a newcomer gets each tool, for the closing line. */
const HOW: Record<string, string> = {
  mosquitto: 'install mosquitto to run them (sudo apt install mosquitto)',
  'mosquitto 2.0.12 or later': 'they need Mosquitto 2.0.12 or later (Debian 13 has 2.0.21; CI also runs them on 2.1)',
  'mosquitto with websockets': "they need a Mosquitto that serves WebSocket (Debian 12's 2.0.11 is built without it; CI runs them on 2.1)",
  rabbitmq: 'install rabbitmq-server to run them (sudo apt install rabbitmq-server)',
  'mosquitto clients': 'install mosquitto-clients to run them (sudo apt install mosquitto-clients)',
  tinyproxy: 'install tinyproxy to run them (sudo apt install tinyproxy: a real HTTP proxy to the vendor)',
  microsocks: 'install microsocks to run them (sudo apt install microsocks: a real SOCKS5 proxy to the vendor)',
  squid: 'install squid to run them (sudo apt install squid: the proxy most sites run, with its CONNECT rules)',
  'squid with ssl-bump': 'install squid-openssl to run them (sudo apt install squid-openssl: a proxy that inspects TLS, as many sites run one)',
  nginx: 'install nginx to run them (sudo apt install nginx: the reverse proxy a site puts in front of the status page)',
  curl: 'install curl to run them (sudo apt install curl)',
  prometheus: 'install prometheus to run them (sudo apt install prometheus: promtool and a real scrape)',
  'gpiod addon': 'they need the GPIO addon, which npm run build makes where a C compiler is (sudo apt install gcc libc6-dev; its "native:" line says what was missing)',
  systemd: 'they need systemd (systemctl, systemd-analyze, systemd-notify)',
  python3: 'install python3 to run them',
  jinja2: "install python3-jinja2 to run them (sudo apt install python3-jinja2: the template engine Home Assistant renders the agent's payloads with)",
  chromium: 'install chromium to run them (sudo apt install chromium)',
  root: 'they run as root only',
  'a loop-mounted ext4 (root)': 'they run as root where a loop device can be mounted (a real ext4 the kernel makes read-only; e2fsprogs for mkfs.ext4 and e2fsck)',
  prlimit: 'install util-linux to run them (prlimit)',
  openssl: 'install openssl to run them (sudo apt install openssl)',
  'update-ca-certificates': 'install ca-certificates to run them (sudo apt install ca-certificates: the box\'s CA store, where a site\'s IT puts its CA)',
};

/**
 * After the run: one line per missing tool with the number of tests it skipped (the tests name
 * what they need as `[needs <tool>]`, test/helpers/tools.ts). Silent when nothing was skipped.
 */
export default class MissingToolsReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const counts = new Map<string, number>();
    for (const m of modules) {
      for (const test of m.children.allTests()) {
        if (test.result().state !== 'skipped') continue;
        // A test that needs several tools is counted under each one this machine lacks.
        for (const [, tool] of test.fullName.matchAll(/\[needs ([^\]]+)\]/g)) {
          if (!has(tool as Tool)) counts.set(tool as string, (counts.get(tool as string) ?? 0) + 1);
        }
      }
    }
    for (const [tool, n] of counts) process.stdout.write(`${n} test${n === 1 ? '' : 's'} skipped: ${HOW[tool] ?? `they need ${tool}`}\n`);
  }
}
