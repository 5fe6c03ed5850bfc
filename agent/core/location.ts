import type { ChairReading, TransactionRecord } from '../vendor/vendor-api.js';

const norm = (s: string): string => s.trim().toLowerCase();

/**
 * vendor.location: an account that spans sites sees every site's chairs and transactions; only
 * those of this Location are kept (compared without case and surrounding spaces). A chair or a
 * record without a Location is not this site's. No location configured keeps everything.
 */
export function locationFilter(location: string | undefined): {
  chair: (c: ChairReading) => boolean;
  record: (r: TransactionRecord) => boolean;
} | null {
  if (location === undefined) return null;
  const want = norm(location);
  return {
    chair: (c) => c.location !== null && norm(c.location) === want,
    record: (r) => {
      const l = r.fields['Location'];
      return typeof l === 'string' && norm(l) === want;
    },
  };
}
