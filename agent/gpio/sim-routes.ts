import { sendJson } from '../http/body.js';
import type { HttpListener } from '../http/listener.js';
import type { SimGpioDriver } from './sim-driver.js';

/** GET /sim/gpio and POST /sim/gpio/<bcm>/press, only with gpio.driver: sim. */
export function simGpioRoutes(http: HttpListener, driver: SimGpioDriver): void {
  http.route('GET', '/sim/gpio', (_req, res) => sendJson(res, 200, driver.state()));
  http.route('POST', /^\/sim\/gpio\/(\d{1,2})\/press$/, async (req, res, match) => {
    req.resume();
    const bcm = Number(match?.[1]);
    if (!driver.isInput(bcm)) return sendJson(res, 404, { error: `BCM ${bcm} is not a button line of this agent` });
    await driver.press(bcm);
    sendJson(res, 200, { pressed: bcm });
  });
}
