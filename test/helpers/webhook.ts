import { signBody } from '../../agent/http/sign.js';
import { TEST_SECRET } from './config.js';

/**
 * POSTs a record to an agent's webhook as the vendor does: the body as given (an object is sent
 * as JSON), signed with `secret`. Resolves to the status and the answer's text.
 */
export async function postWebhook(base: string, record: unknown, secret = TEST_SECRET, path = '/vendor/webhook'): Promise<{ status: number; text: string }> {
  const body = typeof record === 'string' ? record : JSON.stringify(record);
  const res = await fetch(`${base}${path}`, { method: 'POST', headers: { 'x-vendor-signature': signBody(body, secret) }, body });
  return { status: res.status, text: await res.text() };
}

/** As postWebhook, resolving to the status alone. */
export async function webhookStatus(base: string, record: unknown, secret = TEST_SECRET): Promise<number> {
  return (await postWebhook(base, record, secret)).status;
}
