/**
 * Exact decimal amounts for takings: the vendor sends Amount as text with two fractional digits,
 * and a day's sum of floats drifts off the satang. An amount is a bigint count of its smallest
 * unit at a scale (digits after the point); sums are rescaled to the finer of the two, so an
 * amount with more digits than two is still summed exactly.
 */
export interface Decimal {
  readonly units: bigint;
  readonly scale: number;
}

export const ZERO: Decimal = { units: 0n, scale: 2 };

/** At most this many fractional digits: more is not an amount. */
const MAX_SCALE = 8;
const AMOUNT = /^([+-]?)(\d{1,18})(?:\.(\d{1,8}))?$/;

/** "120.00", "-5.5", "7" → a Decimal; anything else (empty, "1e3", "12,00", " ") → null. */
export function parseDecimal(text: string): Decimal | null {
  const m = AMOUNT.exec(text.trim());
  if (!m) return null;
  const frac = m[3] ?? '';
  const units = BigInt(`${m[2]}${frac}`) * (m[1] === '-' ? -1n : 1n);
  return { units, scale: Math.max(frac.length, 0) };
}

function rescale(d: Decimal, scale: number): bigint {
  return d.units * 10n ** BigInt(scale - d.scale);
}

export function addDecimal(a: Decimal, b: Decimal): Decimal {
  const scale = Math.min(MAX_SCALE, Math.max(a.scale, b.scale));
  return { units: rescale(a, scale) + rescale(b, scale), scale };
}

/** At least two fractional digits ("480.00"), more only when an amount had them. */
export function formatDecimal(d: Decimal): string {
  const scale = Math.max(2, d.scale);
  const units = rescale(d, scale);
  const negative = units < 0n;
  const digits = (negative ? -units : units).toString().padStart(scale + 1, '0');
  return `${negative ? '-' : ''}${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
}
