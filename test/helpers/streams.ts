import { Writable } from 'node:stream';

/** A stream whose reader is stalled until `drain()`: everything written stays queued. */
export class StalledPipe extends Writable {
  readonly written: string[] = [];
  private pending: (() => void)[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    if (chunk.length > 0) this.written.push(chunk.toString());
    this.pending.push(done);
  }
  drain(): void {
    for (const done of this.pending.splice(0)) done();
  }
}

/** A stream that keeps each write it is given, as given. */
export class Recorder extends Writable {
  readonly writes: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    if (chunk.length > 0) this.writes.push(chunk.toString());
    done();
  }
}
