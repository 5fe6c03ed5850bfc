import type { ChairView } from './chair-registry.js';

export type StartRefusal =
  | 'unknown_chair'
  | 'chair_unavailable'
  | 'chair_busy'
  | 'start_in_flight'
  | 'start_unconfirmed';

export const REFUSAL_TEXT: Record<StartRefusal, string> = {
  unknown_chair: 'no such chair at this site',
  chair_unavailable: 'the chair is unavailable or its state is stale',
  chair_busy: 'the chair is running',
  start_in_flight: 'a start of this chair is already in progress',
  start_unconfirmed: 'the last start of this chair has an unknown outcome: no new start until the vendor lists it idle or running, or start.unknownHoldSeconds pass',
};

/**
 * Whether a start may go to the vendor. Checked before any control call: a refused start never
 * reaches the vendor.
 */
export function checkStart(view: ChairView | null, inFlight: boolean, unsettled = false): StartRefusal | null {
  if (!view) return 'unknown_chair';
  if (inFlight) return 'start_in_flight';
  if (unsettled) return 'start_unconfirmed';
  if (!view.online || !view.state) return 'chair_unavailable';
  if (view.state.running) return 'chair_busy';
  if (!view.state.startable) return 'chair_unavailable';
  return null;
}
