import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Labels of the SoC GPIO controller whose lines are the 40-pin header's BCM numbers. */
const HEADER_CHIP_LABELS = ['pinctrl-bcm2835', 'pinctrl-bcm2711', 'pinctrl-bcm2712', 'pinctrl-rp1', 'raspberrypi-exp-gpio'];
const PREFERRED = ['pinctrl-rp1', 'pinctrl-bcm2711', 'pinctrl-bcm2835', 'pinctrl-bcm2712'];

export interface GpioChip {
  name: string;
  base: number;
  label: string;
  ngpio: number;
}

export function listChips(sysfsRoot: string): GpioChip[] {
  let entries: string[];
  try {
    entries = readdirSync(sysfsRoot).filter((e) => e.startsWith('gpiochip'));
  } catch {
    return [];
  }
  const chips: GpioChip[] = [];
  for (const name of entries) {
    try {
      const read = (f: string): string => readFileSync(join(sysfsRoot, name, f), 'utf8').trim();
      chips.push({ name, base: Number(read('base')), label: read('label'), ngpio: Number(read('ngpio')) });
    } catch {
      // a chip we cannot read is not the one we want
    }
  }
  return chips.sort((a, b) => a.base - b.base);
}

/**
 * The sysfs number of BCM 0: 0 on older kernels, 512 on a Pi 4 with kernel 6.6+, 571 on a Pi 5
 * (the RP1). Found from the chip labels; failing that, the lowest chip with the 28 header lines.
 */
export function findHeaderBase(sysfsRoot: string): { base: number; chip: GpioChip } | null {
  const chips = listChips(sysfsRoot);
  for (const label of PREFERRED) {
    const chip = chips.find((c) => c.label === label);
    if (chip) return { base: chip.base, chip };
  }
  const fallback = chips.find((c) => HEADER_CHIP_LABELS.includes(c.label) && c.ngpio >= 28) ?? chips.find((c) => c.ngpio >= 28) ?? chips[0];
  return fallback ? { base: fallback.base, chip: fallback } : null;
}
