#!/usr/bin/env bash
# chair-agent installer. Run as root on the site box, from a clone where `npm ci && npm run build`
# has run. Idempotent: running it again upgrades the code and keeps config, credentials and data.
#
#   sudo scripts/install.sh                 install or upgrade, enable the service, start it if the config is valid
#   sudo scripts/install.sh --no-start      the same, without starting
#   sudo scripts/install.sh --uninstall     remove the service and the code; keep config, credentials and data
#   sudo scripts/install.sh --purge         remove everything, data and the chair-agent user included
#   scripts/install.sh --root DIR ...       act on a staging root instead of this machine (tests, image builds)
#
# Secrets: given as CHAIR_AGENT_VENDOR_API_KEY, CHAIR_AGENT_WEBHOOK_SECRET, CHAIR_AGENT_MQTT_PASSWORD in the
# environment (sudo -E), or asked for on a terminal; stored as 0600 root files in /etc/chair-agent/credentials,
# which systemd hands to the service (LoadCredential=). An existing credential is kept unless a new one is given.
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT=""
MODE=install
START=yes
APP=/opt/chair-agent
ETC=/etc/chair-agent
STATE=/var/lib/chair-agent
UNIT=/etc/systemd/system/chair-agent.service
WRAPPER=/usr/local/bin/chair-agent
SERVICE_USER=chair-agent
MIN_NODE=20.19.0

say() { printf 'install: %s\n' "$*"; }
die() { printf 'install: error: %s\n' "$*" >&2; exit 1; }
R() { printf '%s%s' "$ROOT" "$1"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --root) ROOT="${2:?--root needs a directory}"; ROOT="${ROOT%/}"; shift 2 ;;
    --uninstall) MODE=uninstall; shift ;;
    --purge) MODE=purge; shift ;;
    --no-start) START=no; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done

[ "$(id -u)" -eq 0 ] || die "run as root: sudo $0"
if [ -n "$ROOT" ]; then
  mkdir -p "$ROOT"
  ROOT="$(cd "$ROOT" && pwd)"
  ROOTARGS=(--root "$ROOT")
else
  ROOTARGS=()
fi

have_systemd() { [ -z "$ROOT" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; }

version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

check_node() {
  NODE_BIN="$(command -v node || true)"
  [ -n "$NODE_BIN" ] || die "Node.js is not installed: apt install nodejs (Debian trixie / Raspberry Pi OS ship 20.19)"
  local v
  v="$("$NODE_BIN" -p 'process.versions.node')"
  version_ge "$v" "$MIN_NODE" || die "Node.js $v is too old: chair-agent needs $MIN_NODE or newer"
  say "Node.js $v at $NODE_BIN"
}

# Account files of a staging root start with root alone.
seed_accounts() {
  [ -n "$ROOT" ] || return 0
  mkdir -p "$(R /etc)"
  [ -f "$(R /etc/passwd)" ] || printf 'root:x:0:0:root:/root:/bin/bash\n' > "$(R /etc/passwd)"
  [ -f "$(R /etc/group)" ] || printf 'root:x:0:\n' > "$(R /etc/group)"
  [ -f "$(R /etc/shadow)" ] || { printf 'root:*:19000:0:99999:7:::\n' > "$(R /etc/shadow)"; chmod 0640 "$(R /etc/shadow)"; }
  [ -f "$(R /etc/gshadow)" ] || { printf 'root:*::\n' > "$(R /etc/gshadow)"; chmod 0640 "$(R /etc/gshadow)"; }
}

ensure_user() {
  seed_accounts
  grep -q '^gpio:' "$(R /etc/group)" || { groupadd "${ROOTARGS[@]}" --system gpio; say "created group gpio"; }
  if ! grep -q "^$SERVICE_USER:" "$(R /etc/passwd)"; then
    useradd "${ROOTARGS[@]}" --system --user-group --home-dir "$STATE" --no-create-home --shell /usr/sbin/nologin \
      --comment "chair-agent service" --groups gpio "$SERVICE_USER" 2>/dev/null
    say "created system user $SERVICE_USER (in group gpio)"
  elif ! grep -q "^gpio:.*[:,]$SERVICE_USER\(,\|$\)" "$(R /etc/group)"; then
    usermod "${ROOTARGS[@]}" -aG gpio "$SERVICE_USER"
    say "added $SERVICE_USER to group gpio"
  fi
  SVC_UID="$(awk -F: -v u="$SERVICE_USER" '$1==u {print $3}' "$(R /etc/passwd)")"
  SVC_GID="$(awk -F: -v u="$SERVICE_USER" '$1==u {print $4}' "$(R /etc/passwd)")"
}

install_app() {
  [ -f "$SRC/dist/agent/main.js" ] || die "nothing built in $SRC: run npm ci && npm run build first"
  local target new old
  target="$(R "$APP")"
  new="$target.new"
  old="$target.old"
  rm -rf "$new" "$old"
  mkdir -p "$new"
  cp -a "$SRC/dist" "$SRC/package.json" "$SRC/package-lock.json" "$SRC/config" "$SRC/systemd" "$SRC/README.md" "$new/"
  rm -rf "$new/dist/bench"
  if [ -d "$SRC/node_modules" ]; then
    # The clone's own build of the native modules, minus the development tools.
    cp -a "$SRC/node_modules" "$new/node_modules"
    (cd "$new" && npm prune --omit=dev --no-audit --no-fund --loglevel=error >/dev/null)
    # Compiler leftovers of the native modules are not needed to run (SD card space).
    find "$new/node_modules" -path '*/build/Release/obj*' -prune -exec rm -rf {} +
    find "$new/node_modules" -mindepth 1 -maxdepth 1 -type d -empty -delete
  else
    (cd "$new" && npm ci --omit=dev --no-audit --no-fund --loglevel=error >/dev/null)
  fi
  chown -R 0:0 "$new"
  chmod -R u=rwX,go=rX "$new"
  [ -d "$target" ] && mv "$target" "$old"
  mv "$new" "$target"
  rm -rf "$old"
  mkdir -p "$(R /usr/local/bin)"
  printf '#!/bin/sh\nexec %s %s/dist/agent/main.js "$@"\n' "$NODE_BIN" "$APP" > "$(R "$WRAPPER")"
  chmod 0755 "$(R "$WRAPPER")"
  say "installed the agent in $APP (production dependencies only) and $WRAPPER"
}

write_credential() {
  local name="$1" env="$2" label="$3" file value=""
  file="$(R "$ETC/credentials/$name")"
  value="${!env:-}"
  if [ -z "$value" ] && [ ! -s "$file" ] && [ -t 0 ] && [ -z "$ROOT" ]; then
    read -r -s -p "install: $label (empty to skip): " value; printf '\n'
  fi
  if [ -n "$value" ]; then
    (umask 077; printf '%s' "$value" > "$file")
    say "stored credential $name"
  elif [ ! -f "$file" ]; then
    # systemd's LoadCredential= needs the file; an empty one means "not set".
    (umask 077; : > "$file")
  fi
  chown 0:0 "$file"
  chmod 0600 "$file"
}

install_config() {
  install -d -m 0750 -o 0 -g "$SVC_GID" "$(R "$ETC")"
  if [ -f "$(R "$ETC/config.yaml")" ]; then
    say "kept the existing $ETC/config.yaml"
  else
    install -m 0640 -o 0 -g "$SVC_GID" "$SRC/config/config.example.yaml" "$(R "$ETC/config.yaml")"
    say "wrote $ETC/config.yaml from the example: edit it for this site"
  fi
  install -d -m 0700 -o 0 -g 0 "$(R "$ETC/credentials")"
  write_credential vendor-api-key CHAIR_AGENT_VENDOR_API_KEY "vendor API key"
  write_credential webhook-secret CHAIR_AGENT_WEBHOOK_SECRET "webhook channel secret"
  write_credential mqtt-password CHAIR_AGENT_MQTT_PASSWORD "MQTT password"
  install -d -m 0750 -o "$SVC_UID" -g "$SVC_GID" "$(R "$STATE")"
}

install_unit() {
  mkdir -p "$(R /etc/systemd/system)"
  sed "s#^ExecStart=/usr/bin/node #ExecStart=$NODE_BIN #" "$SRC/systemd/chair-agent.service" > "$(R "$UNIT").tmp"
  chmod 0644 "$(R "$UNIT").tmp"
  mv "$(R "$UNIT").tmp" "$(R "$UNIT")"
  if [ -n "$ROOT" ]; then
    systemctl --root="$ROOT" enable chair-agent.service >/dev/null 2>&1
  elif have_systemd; then
    systemctl daemon-reload
    systemctl enable chair-agent.service >/dev/null 2>&1
  else
    say "systemd is not running here: enable the unit yourself"
  fi
  say "installed and enabled $UNIT"
}

config_valid() {
  CREDENTIALS_DIRECTORY="$(R "$ETC/credentials")" "$NODE_BIN" "$(R "$APP")/dist/agent/main.js" check --config "$(R "$ETC/config.yaml")" >/dev/null 2>&1
}

start_service() {
  if [ "$START" = no ] || ! have_systemd; then return 0; fi
  if config_valid; then
    systemctl restart chair-agent.service
    say "started chair-agent (systemctl status chair-agent)"
  else
    say "not started: the config is not complete yet ($ETC/config.yaml; see: chair-agent check)"
  fi
}

next_steps() {
  cat <<TXT

Next:
  1. Edit $ETC/config.yaml: site.id, vendor.baseUrl, mqtt.url, the chairs and their pins.
  2. Secrets (if not given above): sudo sh -c 'umask 077; printf %s KEY > $ETC/credentials/vendor-api-key'
     (and webhook-secret, mqtt-password).
  3. Buttons need pull-ups: add e.g. 'gpio=17,22=ip,pu' to /boot/firmware/config.txt and reboot (README: Wiring).
  4. chair-agent check && chair-agent doctor
  5. sudo systemctl restart chair-agent; journalctl -u chair-agent -f -o cat
TXT
}

uninstall() {
  if [ -n "$ROOT" ]; then
    systemctl --root="$ROOT" disable chair-agent.service >/dev/null 2>&1 || true
  elif have_systemd; then
    systemctl disable --now chair-agent.service >/dev/null 2>&1 || true
  fi
  rm -f "$(R "$UNIT")" "$(R "$WRAPPER")"
  rm -rf "$(R "$APP")" "$(R "$APP").new" "$(R "$APP").old"
  if have_systemd; then systemctl daemon-reload; fi
  say "removed the service and the code"
  if [ "$MODE" = purge ]; then
    rm -rf "$(R "$ETC")" "$(R "$STATE")"
    if grep -q "^$SERVICE_USER:" "$(R /etc/passwd)" 2>/dev/null; then userdel "${ROOTARGS[@]}" "$SERVICE_USER" 2>/dev/null || true; fi
    say "purged $ETC, $STATE and the $SERVICE_USER user"
  else
    say "kept $ETC (config, credentials) and $STATE (data); --purge removes them"
  fi
}

case "$MODE" in
  install)
    check_node
    ensure_user
    install_app
    install_config
    install_unit
    start_service
    next_steps
    ;;
  uninstall|purge)
    uninstall
    ;;
esac
