// Preloaded with `node --import` into a process, and so into each of its worker threads: Date.now()
// is the real clock plus the milliseconds written in $CHAIR_TEST_WALL_OFFSET_FILE, read at every
// call. NTP stepping the wall clock, for code a test cannot hand a Clock (the store's writer thread).
import { readFileSync } from 'node:fs';

const file = process.env.CHAIR_TEST_WALL_OFFSET_FILE;
if (file) {
  const real = Date.now;
  Date.now = () => {
    let offset = 0;
    try {
      offset = Number(readFileSync(file, 'utf8')) || 0;
    } catch {
      // no file: no offset
    }
    return real() + offset;
  };
}
