/**
 * The status page: one document, its style and script inline (the site may be offline, and a
 * Pi should not serve a bundle). Text goes in with textContent only: chair names and statuses
 * come from the vendor and are never parsed as HTML.
 */
export const STATUS_PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>chair-agent</title>
<style>
:root { color-scheme: light dark; --ok: #1b8a3a; --bad: #c0392b; --muted: #777; --card: rgba(127,127,127,.10); }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
header { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: baseline; padding: .8rem 1rem; border-bottom: 1px solid var(--card); }
header h1 { font-size: 1.1rem; margin: 0; }
.pill { padding: .1rem .55rem; border-radius: 1rem; font-size: .85rem; background: var(--card); }
.pill.ok { color: #fff; background: var(--ok); } .pill.bad { color: #fff; background: var(--bad); }
main { padding: 1rem; display: grid; gap: 1rem; grid-template-columns: repeat(auto-fill, minmax(16rem, 1fr)); }
.chair { background: var(--card); border-radius: .7rem; padding: .8rem; display: grid; gap: .3rem; }
.chair h2 { font-size: 1rem; margin: 0; display: flex; align-items: center; gap: .5rem; }
.chair .id { color: var(--muted); font-size: .8rem; }
.led { width: .9rem; height: .9rem; border-radius: 50%; background: #555; flex: none; border: 1px solid rgba(0,0,0,.3); }
.led.on, .led.slow, .led.fast, .led.flash { background: #2ecc40; }
.led.slow { animation: blink 1s steps(1) infinite; } .led.fast { animation: blink .2s steps(1) infinite; }
.led.flash { background: #ff4136; animation: blink .15s steps(1) 4; }
@keyframes blink { 50% { opacity: .15; } }
.remaining { font-size: 1.6rem; font-variant-numeric: tabular-nums; }
.offline { opacity: .55; }
button { font: inherit; padding: .45rem .8rem; border-radius: .4rem; border: 1px solid var(--muted); background: transparent; cursor: pointer; }
button:disabled { opacity: .45; cursor: default; }
section { padding: 0 1rem 1rem; }
section h3 { font-size: .95rem; margin: .5rem 0; }
#events { list-style: none; padding: 0; margin: 0; font-size: .85rem; max-height: 16rem; overflow: auto; }
#events li { padding: .15rem 0; border-bottom: 1px solid var(--card); }
#events time { color: var(--muted); margin-right: .5rem; }
#admin { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; }
#admin input { font: inherit; padding: .4rem; min-width: 12rem; flex: 1; }
#today { border-collapse: collapse; font-size: .9rem; width: 100%; max-width: 40rem; }
#today th, #today td { text-align: left; padding: .2rem .6rem .2rem 0; border-bottom: 1px solid var(--card); }
#today td:nth-child(2), #today td:nth-child(3) { font-variant-numeric: tabular-nums; }
#today tr.site td { font-weight: 600; }
#message { color: var(--muted); font-size: .85rem; min-height: 1.2em; }
</style>
</head>
<body>
<header>
  <h1>chair-agent <span id="site"></span></h1>
  <span id="health" class="pill">connecting...</span>
  <span id="broker" class="pill"></span>
  <span id="backlog" class="pill"></span>
  <span id="live" class="pill">live</span>
</header>
<main id="chairs"></main>
<section id="today-section">
  <h3 id="today-title">Today</h3>
  <table id="today"><thead><tr><th>chair</th><th>uses</th><th>minutes</th><th id="takings-head">takings</th></tr></thead><tbody></tbody></table>
</section>
<section id="admin-section">
  <h3>Actions</h3>
  <div id="admin">
    <input id="token" type="password" placeholder="admin token" autocomplete="current-password" aria-label="admin token">
    <button id="unlock" type="button">Use token</button>
    <label>minutes <input id="minutes" type="number" inputmode="numeric" aria-label="minutes"></label>
    <button id="walk" type="button" disabled>LED walk</button>
  </div>
  <p id="message"></p>
</section>
<section>
  <h3>Health</h3>
  <ul id="checks"></ul>
  <h3>Last events</h3>
  <ul id="events"></ul>
</section>
<script>
(() => {
  const $ = (id) => document.getElementById(id);
  const LED_TEXT = { on: 'steady: available', fast: 'fast blink: starting', slow: 'slow blink: running', flash: 'flashes: start failed', off: 'off', burst: 'bursts' };
  let snap = null;
  let receivedAt = 0;
  // Actions are enabled only once the server has accepted the token (POST /api/admin/check).
  let unlocked = false;
  const token = () => $('token').value.trim();
  // The tab remembers the token. In another site's frame (a dashboard's webpage card) a browser
  // that blocks third-party storage throws on sessionStorage itself: the page works on without it.
  const kept = (act) => { try { return act(sessionStorage); } catch { return null; } };
  $('token').value = kept((s) => s.getItem('chair-agent-token')) || '';
  async function unlock() {
    unlocked = false;
    render();
    if (!token()) { say('enter the admin token to start chairs from this page'); return; }
    try {
      const res = await fetch('api/admin/check', { method: 'POST', headers: { authorization: 'Bearer ' + token() } });
      unlocked = res.ok;
      if (res.ok) { kept((s) => s.setItem('chair-agent-token', token())); say('token accepted: actions enabled'); }
      else { kept((s) => s.removeItem('chair-agent-token')); say('token refused (' + res.status + (res.status === 429 ? ': too many tries, wait ' + (res.headers.get('retry-after') || 60) + ' s' : '') + ')'); }
    } catch (e) { say('cannot check the token (' + e + ')'); }
    render();
  }
  $('unlock').addEventListener('click', unlock);
  $('token').addEventListener('change', unlock);
  $('token').addEventListener('keydown', (e) => { if (e.key === 'Enter') unlock(); });
  const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };
  const mmss = (s) => s === null || s === undefined ? '' : Math.floor(s / 60) + ':' + String(Math.floor(s % 60)).padStart(2, '0');
  const say = (text) => { $('message').textContent = text; };

  async function act(path, what, payload) {
    say(what + '...');
    try {
      const res = await fetch(path, { method: 'POST', headers: { authorization: 'Bearer ' + token(), 'content-type': 'application/json' }, body: payload ? JSON.stringify(payload) : undefined });
      if (res.status === 401) { unlocked = false; render(); }
      const body = await res.json().catch(() => ({}));
      say(res.ok ? what + ': done' : what + ': refused (' + res.status + (body.error ? ', ' + body.error : '') + ')');
    } catch (e) { say(what + ': failed (' + e + ')'); }
  }
  $('walk').addEventListener('click', () => act('api/leds/walk', 'LED walk'));

  function render() {
    if (!snap) return;
    $('site').textContent = snap.site;
    $('health').textContent = snap.health === 'ok' ? 'healthy' : 'degraded';
    $('health').className = 'pill ' + (snap.health === 'ok' ? 'ok' : 'bad');
    $('broker').textContent = snap.broker ? 'broker connected' : 'broker away (buffering)';
    $('broker').className = 'pill ' + (snap.broker ? 'ok' : 'bad');
    $('backlog').textContent = 'backlog ' + (snap.backlog.pending ?? '?') + (snap.backlog.parked ? ' (+' + snap.backlog.parked + ' parked)' : '');
    $('admin-section').hidden = !snap.admin;
    $('walk').disabled = !unlocked;
    const m = $('minutes');
    if (snap.startMinutes && !m.dataset.set) { m.min = snap.startMinutes.min; m.max = snap.startMinutes.max; m.value = snap.startMinutes.default; m.dataset.set = '1'; }
    const elapsed = (Date.now() - receivedAt) / 1000;
    const main = $('chairs');
    main.replaceChildren(...snap.chairs.map((c) => {
      const card = el('article', 'chair' + (c.online ? '' : ' offline'));
      card.dataset.chair = c.deviceId;
      const h = el('h2');
      const led = el('span', 'led ' + c.led);
      led.title = 'LED: ' + (LED_TEXT[c.led] || c.led) + (c.ledWired ? '' : ' (no LED wired)');
      h.append(led, el('span', 'name', c.name || c.deviceId));
      card.append(h, el('span', 'id', c.deviceId + (c.location ? ' - ' + c.location : '')));
      card.append(el('span', 'status', (c.online ? c.status || 'unknown' : 'unavailable') + (c.seated ? ', seated' : '')));
      const left = c.running && c.remainingSeconds !== null ? Math.max(0, c.remainingSeconds - elapsed) : null;
      card.append(el('span', 'remaining', left === null ? '' : mmss(left)));
      card.append(el('span', 'id', 'LED: ' + (LED_TEXT[c.led] || c.led)));
      if (snap.admin) {
        const b = el('button', 'start', 'Start');
        b.type = 'button';
        b.disabled = !unlocked || !c.startable;
        b.title = unlocked ? '' : 'enter the admin token first';
        b.addEventListener('click', () => {
          const minutes = Number($('minutes').value);
          act('api/chairs/' + encodeURIComponent(c.deviceId) + '/start', 'Start ' + c.deviceId + ' (' + minutes + ' min)', { minutes });
        });
        card.append(b);
      }
      return card;
    }));
    if (snap.today) {
      const t = snap.today;
      const money = (k) => Object.entries(k.takings).map(([m, a]) => m + ' ' + a).join(', ') || '-';
      const row = (name, k, cls) => { const tr = el('tr', cls); tr.append(el('td', '', name), el('td', '', String(k.uses)), el('td', '', String(k.minutes)), el('td', '', money(k))); return tr; };
      $('today-title').textContent = 'Today, ' + t.date + (t.capped ? ' (capped)' : '');
      $('takings-head').textContent = t.currency ? 'takings (' + t.currency + ')' : 'takings';
      $('today').tBodies[0].replaceChildren(...Object.entries(t.chairs).map(([id, k]) => row(id, k, '')), row('site', t.site, 'site'));
    }
    $('checks').replaceChildren(...Object.entries(snap.checks).map(([k, v]) => el('li', '', (v.ok ? 'ok ' : 'PROBLEM ') + k + ': ' + v.detail)));
    $('events').replaceChildren(...snap.events.map((e) => { const li = el('li'); li.append(el('time', '', e.at.slice(11, 19)), document.createTextNode(e.text)); return li; }));
  }

  function connect() {
    // Relative URLs throughout: the site's reverse proxy may serve the page under a path (/chairs/).
    const es = new EventSource('events');
    es.addEventListener('snapshot', (e) => { snap = JSON.parse(e.data); receivedAt = Date.now(); $('live').textContent = 'live'; render(); });
    es.onerror = () => { $('live').textContent = 'reconnecting...'; };
  }
  connect();
  if (token()) unlock();
  setInterval(() => { if (snap && snap.chairs.some((c) => c.running)) render(); }, 1000);
})();
</script>
</body>
</html>
`;
