import { chmodSync, chownSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatCheck, gpioDoctorLines } from '../../agent/cli/commands/doctor.js';
import { GpiodDriver } from '../../agent/gpio/gpiod-driver.js';
import { overlayPins } from '../../agent/gpio/wiring.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { ROOT } from '../helpers/cli.js';
import { testConfig } from '../helpers/config.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { FakeGpiod } from '../helpers/fake-gpiod.js';
import { itWith } from '../helpers/tools.js';
import type { ServiceIdentity } from '../../agent/cli/commands/service-identity.js';

const BOOT = join(ROOT, 'test', 'fixtures', 'boot', 'config-1wire-spi.txt');
const config = (chairs: Record<string, unknown>[], extra: Record<string, unknown> = {}) =>
  testConfig({ vendorUrl: 'http://127.0.0.1:9', brokerUrl: 'mqtt://127.0.0.1:9' }, { gpio: { driver: 'gpiod', chairs, ...extra } });

describe('doctor on the GPIO character device', () => {
  it('says the chips are readable, where each line is, that a free button takes its bias, and names who holds a line', async () => {
    const kernel = new FakeGpiod('pi3b-bookworm.txt', new FakeClock());
    const lines = await gpioDoctorLines(config([{ deviceId: 'MC7001', button: 17, led: 27 }, { deviceId: 'MC7002', button: 4, led: 9 }], { statusLed: 5 }), {
      gpiod: kernel,
      devDir: kernel.devDir,
      bootConfigs: ['/nonexistent'],
    });
    expect(lines.map(formatCheck)).toEqual([
      'ok    gpio        character device readable: gpiochip0 [pinctrl-bcm2835], gpiochip1 [raspberrypi-exp-gpio]',
      'ok    gpio        status LED, BCM 5 = gpiochip0 line 5 (GPIO5): free',
      'ok    gpio        MC7001 button, BCM 17 = gpiochip0 line 17 (GPIO17): free; bias pull-up and 30 ms debounce accepted',
      'ok    gpio        MC7001 LED, BCM 27 = gpiochip0 line 27 (GPIO27): free',
      'FAIL  gpio        MC7002 button, BCM 4 = gpiochip0 line 4 (GPIO_GCLK), the header chip\'s line of that number: used by "onewire@0"\n            hint: an overlay or program holds it: pick another pin, or remove the overlay from /boot/firmware/config.txt',
      "ok    gpio        MC7002 LED, BCM 9 = gpiochip0 line 9 (SPI_MISO), the header chip's line of that number: free",
    ]);
    expect(kernel.open).toBe(0); // the bias check let go of the line
  });

  it('reports a line the running service holds as such, without touching it', async () => {
    const kernel = new FakeGpiod('pi5b-trixie.txt', new FakeClock());
    const service = new GpiodDriver({ logger: silentLogger(), devDir: kernel.devDir, binding: kernel, bias: 'pull-up' });
    await service.init();
    service.openInput(17, { activeLow: true, debounceMs: 30 }, () => undefined);
    const lines = await gpioDoctorLines(config([{ deviceId: 'MC7001', button: 17 }]), { gpiod: kernel, devDir: kernel.devDir, bootConfigs: ['/nonexistent'] });
    expect(lines[1]?.detail).toBe('MC7001 button, BCM 17 = gpiochip0 line 17 (GPIO17): held by the chair-agent service');
    service.close();
  });

  it('says the character device cannot be opened, with the fix', async () => {
    const kernel = new FakeGpiod('pi4b-bookworm.txt', new FakeClock());
    kernel.denied = true;
    const [line] = await gpioDoctorLines(config([{ deviceId: 'MC7001', button: 17 }]), { gpiod: kernel, devDir: kernel.devDir, bootConfigs: ['/nonexistent'] });
    expect(line).toMatchObject({ ok: false, hint: expect.stringContaining('usermod -aG gpio chair-agent') });
    expect(line?.detail).toContain('permission denied');
  });

  // Debian and Ubuntu leave /dev/gpiochip* root's (0600); Raspberry Pi OS, and the package's
  // udev rule elsewhere, give them to group gpio. doctor opens them as root either way.
  itWith('root', 'fails a chip the service cannot open, as Debian leaves it, and passes it once group gpio has it', async () => {
    const kernel = new FakeGpiod('pi4b-bookworm.txt', new FakeClock());
    const chip = join(kernel.devDir, 'gpiochip0');
    chmodSync(kernel.devDir, 0o755);
    chmodSync(chip, 0o600);
    const gpio = 64_993;
    const service: ServiceIdentity = { name: 'chair-agent', uid: 64_100, gid: 64_100, groups: [gpio], hidden: [], writable: null, stateDirectories: [], readOnlyBy: '' };
    const check = () => gpioDoctorLines(config([{ deviceId: 'MC7001', button: 17, led: 27 }]), { gpiod: kernel, devDir: kernel.devDir, bootConfigs: ['/nonexistent'], service });
    const failed = (await check()).filter((l) => !l.ok);
    expect(failed).toEqual([
      {
        name: 'gpio',
        ok: false,
        detail: `${chip} (mode 0600, owner 0:0) cannot be opened by chair-agent, the service's user: its buttons and LEDs would not work`,
        hint: "the package's udev rule (60-chair-agent-gpio.rules) gives /dev/gpiochip* to group gpio: sudo udevadm trigger --subsystem-match=gpio, or reboot; ls -l /dev/gpiochip* shows it",
      },
    ]);
    chownSync(chip, 0, gpio);
    chmodSync(chip, 0o660);
    expect((await check()).filter((l) => !l.ok)).toEqual([]);
  });

  it('finds the pins of the interfaces enabled in /boot/firmware/config.txt that a button or LED is on', async () => {
    const kernel = new FakeGpiod('pi4b-bookworm.txt', new FakeClock());
    const lines = await gpioDoctorLines(config([{ deviceId: 'MC7001', button: 4, led: 10 }, { deviceId: 'MC7002', button: 17, led: 15 }]), { gpiod: kernel, devDir: kernel.devDir, bootConfigs: [BOOT] });
    const overlays = lines.find((l) => l.name === 'overlays');
    expect(overlays?.ok).toBe(false);
    expect(overlays?.detail).toBe(
      `BCM 4 (MC7001 button) is taken by 1-Wire (dtoverlay=w1-gpio,gpiopin=4), line 20; BCM 10 (MC7001 LED) is taken by SPI (dtparam=spi=on), line 8; BCM 15 (MC7002 LED) is taken by UART (enable_uart=1), line 21 in ${BOOT}`,
    );
  });

  it('reads the interfaces of a boot config: I2C, SPI, UART, 1-Wire with its pin, commented lines ignored', () => {
    const pins = overlayPins('dtparam=i2c_arm=on\n#dtparam=spi=on\ndtparam=spi=off\nenable_uart=0\ndtoverlay=w1-gpio,gpiopin=26\ndtoverlay=uart3\n');
    expect(pins.map((p) => [p.what.split(' ')[0], p.pins])).toEqual([
      ['I2C', [2, 3]],
      ['1-Wire', [26]],
      ['UART', [4, 5]],
    ]);
  });
});
