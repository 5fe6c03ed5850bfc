import { formatIsoWithOffset } from '../time/vendor-time.js';
import type { StoredRecord } from '../store/records.js';

/**
 * A record's receipt time as site time. One batch of records shares one receivedAt, so the last
 * one formatted is kept (per publisher: nothing is shared between instances).
 */
export class ReceivedAtText {
  private at = Number.NaN;
  private zone = '';
  private text = '';

  format(at: number, timeZone: string): string {
    if (this.at !== at || this.zone !== timeZone) {
      this.at = at;
      this.zone = timeZone;
      this.text = formatIsoWithOffset(at, timeZone);
    }
    return this.text;
  }
}

/** The record as published: the vendor's fields verbatim, plus one object `agent`. */
export function transactionPayload(rec: StoredRecord, siteId: string, timeZone: string, receivedAt: ReceivedAtText = new ReceivedAtText()): string {
  const startRequest = rec.startRequest ? `,"startRequest":${rec.startRequest}` : '';
  const agent = `{"site":${JSON.stringify(siteId)},"source":"${rec.source}","receivedAt":"${receivedAt.format(rec.receivedAt, timeZone)}","seq":${rec.seq}${startRequest}}`;
  const body = rec.record.trimEnd();
  const inner = body.slice(1, -1).trim();
  return `{${inner}${inner === '' ? '' : ','}"agent":${agent}}`;
}
