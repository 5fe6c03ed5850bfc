#!/bin/sh
# Runs in the test VM under a booted systemd (scripts/kernel-test.mjs, second boot), as the unit
# kernel-test.service: the package's unit as systemd runs it. An installer restarting with configs
# that do not validate is never locked out; a crash loop ends after 5 crashes in 5 minutes, and
# the next manual start runs. Prints "ok: ..." and "SYSTEMD-TEST PASS" or "SYSTEMD-TEST FAIL: ..."
# on the serial console, then powers off.
# The kernel console (ttyS0 on amd64, ttyAMA0 on arm64): the host reads it.
exec > /dev/console 2>&1
fail() { echo "SYSTEMD-TEST FAIL: $*"; journalctl -u chair-agent -o cat --no-pager | tail -20; systemctl poweroff -ff; exit 1; }
# Each check says when it passed (seconds since boot): under TCG the whole takes minutes of CI.
ok() { echo "ok: $* [$(cut -d. -f1 /proc/uptime) s]"; }
journal() { journalctl -u chair-agent -o cat --no-pager; }
# What journald filed at this priority or worse (journalctl -p): "warning", "err".
journal_at() { journalctl -u chair-agent -p "$1" -o cat --no-pager; }
# The config the steps below run with; $1 is its webhook section, $2 its gpio section (sim by
# default), $3 the vendor's URL (a closed port by default).
write_config() {
  cat > /etc/chair-agent/config.yaml <<YAML
site: {id: systemd-vm}
vendor: {baseUrl: "${3:-http://127.0.0.1:9}", apiKey: systemd-test-key-0001}
webhook: $1
http: {host: 127.0.0.1, port: 8080}
mqtt: {url: "mqtt://127.0.0.1:1883"}
gpio: ${2:-"{driver: sim}"}
YAML
}
echo "systemd $(systemctl --version | head -1 | cut -d' ' -f2)"
/opt/chair-agent/lib/setup.sh > /tmp/setup.log 2>&1 || fail "lib/setup.sh: $(tail -3 /tmp/setup.log)"
ok "lib/setup.sh installed the unit, the user and the example config"

# 1. An installer trying configs: 8 restarts in a row, each config refused (exit 78).
i=0
while [ $i -lt 8 ]; do
  systemctl restart chair-agent 2>/dev/null
  i=$((i + 1))
done
starts=$(journal | grep -c 'configuration error')
[ "$starts" -ge 8 ] || fail "only $starts of 8 manual starts ran"
journal | grep -q 'Start request repeated too quickly' && fail "systemd's start limit locked the installer out"
systemctl status chair-agent --no-pager 2>&1 | grep -q 'start-limit-hit' && fail "start-limit-hit"
ok "8 manual restarts with a bad config: all 8 ran (exit 78 each), no start limit"
errs=$(journal_at err | grep -c 'configuration error')
[ "$errs" -ge 8 ] || fail "journalctl -p err has $errs of the 8 configuration errors: journald did not file them as errors"
journal | grep -q '^<[0-9]>' && fail "a line kept its priority prefix: journald did not strip it ($(journal | grep -m1 '^<[0-9]>' | cut -c1-60))"
ok "journalctl -p err shows each configuration error (the agent writes its priority, journald strips it)"

# 1b. doctor reads the config as the service would: made 0600 root (an editor's copy, a restore),
#     root reads it and the service would stop at start. Put back as setup.sh installs it.
doctor_access() { /opt/chair-agent/bin/chair-agent doctor 2>&1 | grep -A1 'access'; }
write_config '{enabled: false}'
chmod 0600 /etc/chair-agent/config.yaml
doctor_access | grep -q 'FAIL  access .*config: /etc/chair-agent/config.yaml is not readable by chair-agent' || fail "doctor did not see the config out of the service's reach: $(doctor_access)"
chmod 0640 /etc/chair-agent/config.yaml
doctor_access | grep -q 'ok    access .*chair-agent reads config' || fail "doctor did not pass the config as installed: $(doctor_access)"
ok "doctor: a config 0600 root fails its access line (the service would stop at start); 0640 group chair-agent passes"

# 2. A crash loop: the agent killed as soon as it runs, 5 times; then it stays stopped.
write_config '{enabled: false}'
systemctl restart chair-agent || fail "the agent did not start with a valid config: $(journal | tail -5)"
ok "with a valid config the service starts (Type=notify: READY=1 came)"
kills=0
last=""
while [ $kills -lt 5 ]; do
  n=0
  while :; do
    pid=$(systemctl show -p MainPID --value chair-agent)
    state=$(systemctl show -p ActiveState --value chair-agent)
    if [ "$state" = active ] && [ "$pid" != 0 ] && [ "$pid" != "$last" ]; then break; fi
    n=$((n + 1)); [ $n -gt 600 ] && fail "the service did not come back after crash $kills ($state)"
    sleep 0.2
  done
  last=$pid
  kill -KILL "$pid"
  kills=$((kills + 1))
done
ok "killed the agent 5 times (kill -9), each time systemd restarted it"
n=0
until journal | grep -q 'crashed 5 times in the last 5 minutes'; do
  n=$((n + 1)); [ $n -gt 600 ] && fail "the crash loop did not stop: $(systemctl show -p ActiveState --value chair-agent)"
  sleep 0.2
done
sleep 8
state=$(systemctl show -p ActiveState --value chair-agent)
[ "$state" = failed ] || [ "$state" = inactive ] || fail "after the guard the service is $state"
ok "after 5 crashes the guard stopped it: $state, not restarted ($(journal | grep -m1 'crashed 5 times' | cut -c1-60)...)"
journal_at err | grep -q 'crashed 5 times' || fail "journalctl -p err does not show the crash guard's line"

# 3. The next manual start runs.
started=$(journal | grep -c '"msg":"agent started"')
systemctl restart chair-agent || fail "the manual start after the crash loop failed: $(journal | tail -5)"
[ "$(systemctl show -p ActiveState --value chair-agent)" = active ] || fail "not active after the manual start"
ok "the next manual start runs"

# 4. Its log reaches the journal through the stream socket systemd gives it as stdout, which it
#    writes on the event loop (agent/platform/log-sink.ts) rather than through the thread pool.
pid=$(systemctl show -p MainPID --value chair-agent)
out=$(readlink "/proc/$pid/fd/1")
case "$out" in socket:*) ;; *) fail "stdout of the agent is $out, not journald's stream socket" ;; esac
n=0
until [ "$(journal | grep -c '"msg":"agent started"')" -gt "$started" ]; do
  n=$((n + 1)); [ $n -gt 300 ] && fail "the agent's JSON lines did not reach the journal"
  sleep 0.2
done
ok "its JSON lines reach the journal through stdout ($out)"
# Each line at its level's priority: with no broker and no vendor there are warnings, and
# journalctl -p warning shows them and no line of level info.
n=0
until journal_at warning | grep -q '^{"level":"warn"'; do
  n=$((n + 1)); [ $n -gt 300 ] && fail "journalctl -p warning shows no warning of the agent: $(journal_at warning | tail -3)"
  sleep 0.2
done
journal_at warning | grep -q '^{"level":"info"' && fail "journalctl -p warning shows info lines: $(journal_at warning | grep -m1 '^{"level":"info"' | cut -c1-80)"
journalctl -u chair-agent -p info -o cat --no-pager | grep -q '"msg":"agent started"' || fail "journalctl -p info lacks \"agent started\""
ok "journalctl -p warning shows its warnings and errors, and no info line ($(journal_at warning | grep -c '^{"level"') lines)"

# 5. The webhook on a port of its own (webhook.port), as the unit's sandbox runs it: the vendor's
#    port stores a signed record and serves nothing else; the LAN's port keeps health and no longer
#    serves the webhook. No broker: the record waits in the outbox, and is answered 200 once stored.
write_config '{channelSecret: systemd-test-secret-0001, port: 8443}'
systemctl restart chair-agent || fail "the agent did not start with webhook.port: $(journal | tail -5)"
answers=$(/opt/chair-agent/runtime/bin/node --input-type=module - <<'JS'
import { createHmac } from 'node:crypto';
const body = JSON.stringify({ TransactionId: 'SYSTEMD-1', Status: 'finished', DeviceId: 'MC7001', Amount: '20.00' });
const signature = createHmac('sha256', 'systemd-test-secret-0001').update(body).digest('base64');
const post = (port) => fetch(`http://127.0.0.1:${port}/vendor/webhook`, { method: 'POST', headers: { 'x-vendor-signature': signature }, body }).then((r) => r.status);
const get = (port, path) => fetch(`http://127.0.0.1:${port}${path}`).then((r) => r.status);
console.log([await post(8443), await get(8443, '/metrics'), await post(8080), await get(8080, '/healthz') === 404 ? 404 : 'up'].join(' '));
JS
) || fail "could not reach the agent's ports"
[ "$answers" = "200 404 404 up" ] || fail "webhook port 200, its /metrics 404, the LAN port's webhook 404 and /healthz up; got: $answers"
journal | grep -q '"msg":"webhook listener up"' || fail "no 'webhook listener up' in the journal"
ok "webhook.port: the record stored (200) on 8443, which serves nothing else; 8080 keeps /healthz, not the webhook"

# 6. HTTPS on that port (webhook.cert, webhook.key). First with the key left 0600 root, as a
#    renewal hook may leave it: the service (user chair-agent) cannot read it, and runs on with
#    that port closed. Then the key as OPERATIONS.md puts it, readable by the service's group
#    only: the port opens within a minute, without a restart. A client that checks the
#    certificate stores a record there; plain HTTP gets no answer.
if [ -f /test/webhook.crt ]; then
  install -d -m 0750 -o root -g chair-agent /etc/chair-agent/tls
  install -m 0644 -o root -g root /test/webhook.crt /etc/chair-agent/tls/webhook.crt
  install -m 0600 -o root -g root /test/webhook.key /etc/chair-agent/tls/webhook.key
  write_config '{channelSecret: systemd-test-secret-0001, port: 8443, cert: /etc/chair-agent/tls/webhook.crt, key: /etc/chair-agent/tls/webhook.key}'
  systemctl restart chair-agent || fail "the agent did not run with a key it cannot read: $(journal | tail -5)"
  journal | grep -q 'webhook listener not started: webhook.key: cannot read /etc/chair-agent/tls/webhook.key (EACCES)' || fail "no 'webhook listener not started' for the unreadable key"
  [ "$(systemctl show -p ActiveState --value chair-agent)" = active ] || fail "the service is not active with an unreadable key"
  ok "webhook.key unreadable by the service: it runs (active), the webhook port closed, the reason in the journal"
  chown root:chair-agent /etc/chair-agent/tls/webhook.key
  chmod 0640 /etc/chair-agent/tls/webhook.key
  n=0
  until journal | grep -q '"tls":true'; do
    n=$((n + 1)); [ $n -gt 600 ] && fail "the webhook port did not open after the key was made readable"
    sleep 0.2
  done
  answers=$(/opt/chair-agent/runtime/bin/node --input-type=module - <<'JS'
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
const body = JSON.stringify({ TransactionId: 'SYSTEMD-TLS-1', Status: 'finished', DeviceId: 'MC7001', Amount: '20.00' });
const signature = createHmac('sha256', 'systemd-test-secret-0001').update(body).digest('base64');
const status = await new Promise((resolve) => {
  const req = request({ host: '127.0.0.1', port: 8443, path: '/vendor/webhook', method: 'POST', ca: readFileSync('/test/webhook.crt'), headers: { 'x-vendor-signature': signature } }, (res) => {
    res.resume();
    resolve(res.statusCode);
  });
  req.on('error', (err) => resolve(err.message));
  req.end(body);
});
const plain = await fetch('http://127.0.0.1:8443/vendor/webhook', { method: 'POST', body }).then((r) => r.status, () => 'refused');
console.log([status, plain].join(' '));
JS
  ) || fail "could not reach the agent's webhook port"
  [ "$answers" = "200 refused" ] || fail "HTTPS 200 and plain HTTP refused on the webhook port; got: $answers"
  ok "webhook.cert: once the key was 0640, group chair-agent, the port opened without a restart; a record stored over HTTPS (200), plain HTTP refused"

  # 7. The key kept the Debian way: /etc/ssl/private 0710 and the key 0640, group ssl-cert, which
  #    the service gets from a drop-in. doctor (root) reads it as the service would, with the
  #    groups the unit as installed gives it: first without the drop-in, then with it.
  getent group ssl-cert > /dev/null || groupadd --system ssl-cert
  install -d -m 0710 -o root -g ssl-cert /etc/ssl/private
  install -m 0640 -o root -g ssl-cert /test/webhook.key /etc/ssl/private/webhook.key
  write_config '{channelSecret: systemd-test-secret-0001, port: 8443, cert: /etc/chair-agent/tls/webhook.crt, key: /etc/ssl/private/webhook.key}'
  doctor_https() { /opt/chair-agent/bin/chair-agent doctor 2>&1 | grep -A1 'https'; }
  doctor_https | grep -q 'FAIL  https .*/etc/ssl/private is not searchable by chair-agent' || fail "doctor did not see that the service cannot reach /etc/ssl/private: $(doctor_https)"
  mkdir -p /etc/systemd/system/chair-agent.service.d
  printf '[Service]\nSupplementaryGroups=gpio ssl-cert\n' > /etc/systemd/system/chair-agent.service.d/ssl-cert.conf
  systemctl daemon-reload
  doctor_https | grep -q 'ok    https' || fail "doctor did not read the key with the drop-in's group: $(doctor_https)"
  systemctl restart chair-agent || fail "the agent did not start with the key in /etc/ssl/private: $(journal | tail -5)"
  n=0
  until [ "$(journal | grep -c '"tls":true')" -ge 2 ]; do
    n=$((n + 1)); [ $n -gt 150 ] && fail "the webhook port did not open with the key in /etc/ssl/private: $(journal | tail -3)"
    sleep 0.2
  done
  ok "webhook.key in /etc/ssl/private (group ssl-cert): doctor failed it, then passed it once a drop-in gave the unit the group, and the service served it"

  # 7b. The vendor over HTTPS under a CA the runtime does not carry (the site's inspecting proxy,
  #     say), which the site's IT puts in the box's store the Debian way: the service, as its user
  #     and in its sandbox, trusts it from /etc/ssl/certs after update-ca-certificates.
  command -v update-ca-certificates > /dev/null || fail "no update-ca-certificates in this root (ca-certificates)"
  /opt/chair-agent/bin/chair-agent simulate --port 9080 --api-key systemd-test-key-0001 > /tmp/simulate.log 2>&1 &
  simulator=$!
  /opt/chair-agent/runtime/bin/node -e '
    const { readFileSync } = require("node:fs");
    const { request } = require("node:http");
    require("node:https").createServer({ cert: readFileSync("/test/webhook.crt"), key: readFileSync("/test/webhook.key") }, (req, res) => {
      const up = request({ host: "127.0.0.1", port: 9080, path: req.url, method: req.method, headers: req.headers }, (r) => { res.writeHead(r.statusCode, r.headers); r.pipe(res); });
      up.on("error", () => res.destroy());
      req.pipe(up);
    }).listen(9443, "127.0.0.1");' &
  front=$!
  write_config '{enabled: false}' '{driver: sim}' 'https://127.0.0.1:9443'
  systemctl restart chair-agent || fail "the agent did not start with an https vendor: $(journal | tail -5)"
  n=0
  until journal | grep -q 'certificate presented for 127.0.0.1:9443 is not trusted'; do
    n=$((n + 1)); [ $n -gt 300 ] && fail "the service did not say the vendor's certificate is not trusted: $(journal | tail -3)"
    sleep 0.2
  done
  install -m 0644 /test/webhook.crt /usr/local/share/ca-certificates/site-ca.crt
  update-ca-certificates > /tmp/update-ca.log 2>&1 || fail "update-ca-certificates: $(tail -3 /tmp/update-ca.log)"
  systemctl restart chair-agent || fail "the agent did not restart: $(journal | tail -5)"
  n=0
  until [ "$(journal | grep -c 'vendor API reachable')" -ge 1 ]; do
    n=$((n + 1)); [ $n -gt 300 ] && fail "the service did not reach the vendor under the CA in /etc/ssl/certs: $(journal | tail -3)"
    sleep 0.2
  done
  kill "$front" "$simulator" 2>/dev/null
  ok "vendor over HTTPS under a CA the runtime does not carry: not trusted; put in /usr/local/share/ca-certificates and update-ca-certificates run, the service reached it"
else
  ok "webhook.cert: skipped (no openssl on the host to make a certificate)"
fi
# 7c. A proxy the site's IT set for the box in /etc/environment, for apt and curl: a login shell
#     (and sudo, through pam_env) has it, the service does not, so doctor checks the vendor as the
#     service reaches it, and says so. The service's own proxy, from a drop-in's Environment=, an
#     EnvironmentFile= or the manager's environment, is the one doctor checks through.
/opt/chair-agent/bin/chair-agent simulate --port 9080 --api-key systemd-test-key-0001 > /tmp/simulate-proxy.log 2>&1 &
simulator=$!
write_config '{enabled: false}' '{driver: sim}' 'http://127.0.0.1:9080'
doctor_proxy() { env "$@" /opt/chair-agent/bin/chair-agent doctor 2>&1 | grep -A1 -E '^(ok|FAIL) +(proxy|vendor API) '; }
n=0
until doctor_proxy | grep -q '^ok    vendor API'; do
  n=$((n + 1)); [ $n -gt 50 ] && fail "doctor did not reach the simulator: $(doctor_proxy)"
  sleep 0.2
done
doctor_proxy | grep -qE '^(ok|FAIL) +proxy ' && fail "doctor spoke of a proxy where there is none: $(doctor_proxy)"
shell=$(doctor_proxy http_proxy=http://127.0.0.1:9)
echo "$shell" | grep -q "^ok    proxy .*this shell's http_proxy (http://127.0.0.1:9) is not the service's: systemd gives a service no login environment" || fail "doctor did not say the shell's proxy is not the service's: $shell"
echo "$shell" | grep -q '^ok    vendor API' || fail "doctor did not check the vendor as the service reaches it (directly): $shell"
env http_proxy=http://127.0.0.1:9 /opt/chair-agent/bin/chair-agent check > /tmp/check-proxy.txt 2>&1
grep -q "^# as the service reads it: this shell's http_proxy (http://127.0.0.1:9) is not in the environment systemd gives the service" /tmp/check-proxy.txt || fail "check did not say the shell's proxy is not the service's: $(head -3 /tmp/check-proxy.txt)"
grep -q '^  proxy:' /tmp/check-proxy.txt && fail "check showed the shell's proxy as the service's: $(grep proxy /tmp/check-proxy.txt)"
mkdir -p /etc/systemd/system/chair-agent.service.d
printf '[Service]\nEnvironment="HTTP_PROXY=http://127.0.0.1:9" "SITE_NOTE=proxy for apt and curl"\n' > /etc/systemd/system/chair-agent.service.d/proxy.conf
systemctl daemon-reload
unit=$(doctor_proxy)
echo "$unit" | grep -q "^ok    proxy .*the vendor checked through the service's HTTP_PROXY (http://127.0.0.1:9, from the environment systemd gives it); this shell has none" || fail "doctor did not take the drop-in's proxy ($(systemctl show chair-agent -p Environment)): $unit"
echo "$unit" | grep -q '^FAIL  vendor API' || fail "doctor did not check the vendor through the service's proxy: $unit"
# An EnvironmentFile= wins over Environment=: /etc/environment given to the service, as sites do.
printf '# set by the site\nHTTP_PROXY="http://127.0.0.1:7"\n' > /etc/environment
printf '[Service]\nEnvironmentFile=-/etc/environment\n' > /etc/systemd/system/chair-agent.service.d/environment.conf
systemctl daemon-reload
file=$(doctor_proxy HTTP_PROXY=http://127.0.0.1:7)
echo "$file" | grep -qE '^(ok|FAIL) +proxy ' && fail "doctor spoke of a proxy that the shell and the service share: $file"
file=$(doctor_proxy)
echo "$file" | grep -q "the service's HTTP_PROXY (http://127.0.0.1:7, from the environment systemd gives it)" || fail "doctor did not read the unit's EnvironmentFile=: $file"
rm /etc/systemd/system/chair-agent.service.d/proxy.conf /etc/systemd/system/chair-agent.service.d/environment.conf /etc/environment
systemctl daemon-reload
systemctl set-environment HTTP_PROXY=http://127.0.0.1:6
manager=$(doctor_proxy)
systemctl unset-environment HTTP_PROXY
echo "$manager" | grep -q "the service's HTTP_PROXY (http://127.0.0.1:6, from the environment systemd gives it)" || fail "doctor did not read the manager's environment ($(systemctl show-environment | grep -i proxy)): $manager"
kill "$simulator" 2>/dev/null
ok "a proxy in this shell's environment only: doctor and check said the service does not get it, doctor checked directly; the service's from a drop-in, an EnvironmentFile= and the manager's environment: doctor checked through it"
# 8. The database on a disk of its own, mounted at /data (the SD card's sake). root writes there,
#    the service does not (ProtectSystem=strict): doctor says so, before the service would fail
#    at every start. With the drop-in doctor names and /data the service's, it starts and stores.
install -d -m 0755 -o root -g root /data
write_config '{channelSecret: systemd-test-secret-0001}'
printf 'storage: {path: /data/agent.db}\n' >> /etc/chair-agent/config.yaml
doctor_db() { /opt/chair-agent/bin/chair-agent doctor 2>&1 | grep -A1 'database'; }
doctor_db | grep -q 'FAIL  database .*/data is read-only for the service (ProtectSystem=strict: it writes only under /var/lib/chair-agent)' || fail "doctor did not see /data read-only for the service: $(doctor_db)"
chown chair-agent:chair-agent /data
mkdir -p /etc/systemd/system/chair-agent.service.d
printf '[Service]\nReadWritePaths=/data\n' > /etc/systemd/system/chair-agent.service.d/data.conf
systemctl daemon-reload
# (The VM's root is a tmpfs, which doctor fails for another reason: a power cut empties it.)
doctor_db | grep -q 'read-only for the service\|not writable by' && fail "doctor did not pass /data for the service with ReadWritePaths=/data: $(doctor_db)"
doctor_db | grep -q '/data/agent.db does not exist yet; /data is writable' || fail "doctor said nothing of /data: $(doctor_db)"
systemctl restart chair-agent || fail "the agent did not start with its database in /data: $(journal | tail -5)"
[ -f /data/agent.db ] || fail "no /data/agent.db"
# The service reads its mount table for a file system the kernel made read-only: in its sandbox
# everything is a read-only bind mount but its StateDirectory and ReadWritePaths. (Its health is
# still not ok: a tmpfs root is volatile; the detail says writable first.)
db_health=$(/opt/chair-agent/runtime/bin/node -e 'fetch("http://127.0.0.1:8080/healthz").then((r) => r.json()).then((h) => console.log(h.checks.database.detail))') || fail "no /healthz"
case "$db_health" in writable*) ;; *) fail "the service calls /data not writable under its sandbox: $db_health" ;; esac
ok "storage.path in /data: doctor failed it (ProtectSystem=strict), passed it with ReadWritePaths=/data, and the service ran with it, its health saying writable"
# 9. The buttons and LEDs on the GPIO character device, under the packaged unit. Debian's udev
#    leaves a GPIO chip root's (0600), where the service (user chair-agent, group gpio) cannot
#    open it: doctor, run as root, says so. setup.sh's udev rule gives the chip to group gpio, as
#    Raspberry Pi OS's own rules do; then the service drives its lines.
modprobe gpio-sim || fail "modprobe gpio-sim"
mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
sim=/sys/kernel/config/gpio-sim/pi
mkdir $sim $sim/bank0 && echo 28 > $sim/bank0/num_lines && echo pinctrl-rp1 > $sim/bank0/label || fail "gpio-sim chip"
i=0
while [ $i -lt 28 ]; do mkdir $sim/bank0/line$i && echo GPIO$i > $sim/bank0/line$i/name; i=$((i + 1)); done
mv /etc/udev/rules.d/60-chair-agent-gpio.rules /root/
udevadm control --reload-rules
echo 1 > $sim/live || fail "gpio-sim chip live"
udevadm settle
chip=/dev/$(cat $sim/bank0/chip_name)
[ "$(stat -c '%a %U:%G' "$chip")" = "600 root:root" ] || fail "without the rule $chip is $(stat -c '%a %U:%G' "$chip"), not Debian's 600 root:root"
write_config '{enabled: false}' '{driver: gpiod, chairs: [{deviceId: MC7001, button: 17, led: 27}]}'
doctor_gpio() { /opt/chair-agent/bin/chair-agent doctor 2>&1 | grep -A1 'gpio '; }
doctor_gpio | grep -q "FAIL  gpio .*$chip (mode 0600, owner 0:0) cannot be opened by chair-agent" || fail "doctor did not see $chip closed to the service: $(doctor_gpio)"
/opt/chair-agent/lib/setup.sh > /tmp/setup2.log 2>&1 || fail "lib/setup.sh again: $(tail -3 /tmp/setup2.log)"
[ "$(stat -c '%a %G' "$chip")" = "660 gpio" ] || fail "after setup.sh $chip is $(stat -c '%a %G' "$chip"), not 660 gpio"
doctor_gpio | grep -q 'FAIL' && fail "doctor still fails the GPIO: $(doctor_gpio)"
systemctl restart chair-agent || fail "the agent did not start on gpiod: $(journal | tail -5)"
health=$(/opt/chair-agent/runtime/bin/node -e 'fetch("http://127.0.0.1:8080/healthz").then((r) => r.json()).then((h) => console.log(h.checks.gpio.ok, h.checks.gpio.detail))') || fail "no /healthz"
case "$health" in true*) ;; *) fail "the service's GPIO is not ok: $health" ;; esac
ok "GPIO: $chip root's 0600 as Debian leaves it, and doctor said so; setup.sh's udev rule made it 660 gpio, and the service drives its lines ($health)"
echo "SYSTEMD-TEST PASS"
systemctl poweroff -ff
