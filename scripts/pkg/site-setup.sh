# chair-agent site set-up, shared by the .deb's postinst and scripts/install.sh (POSIX sh).
# Installed as /opt/chair-agent/lib/site-setup.sh. The caller may set ROOT (a staging root,
# empty for this machine) and defines say().
#
# The system user chair-agent (in group gpio), /etc/chair-agent (root:chair-agent 0750, the
# config 0640), /etc/chair-agent/credentials (root 0700, one 0600 file per secret; an empty file
# means "not set", because systemd's LoadCredential= needs the file to exist), /var/lib/chair-agent.

SERVICE_USER=chair-agent
APP=/opt/chair-agent
ETC=/etc/chair-agent
CREDENTIALS=/etc/chair-agent/credentials
STATE=/var/lib/chair-agent
CACHE=/var/cache/chair-agent
UNIT_NAME=chair-agent.service
CREDENTIAL_NAMES="vendor-api-key webhook-secret mqtt-password admin-token"

R() { printf '%s%s' "${ROOT:-}" "$1"; }
root_args() { if [ -n "${ROOT:-}" ]; then printf -- '--root %s' "$ROOT"; fi; }

# A staging root's account files start with root alone.
seed_accounts() {
  [ -n "${ROOT:-}" ] || return 0
  mkdir -p "$(R /etc)"
  [ -f "$(R /etc/passwd)" ] || printf 'root:x:0:0:root:/root:/bin/bash\n' > "$(R /etc/passwd)"
  [ -f "$(R /etc/group)" ] || printf 'root:x:0:\n' > "$(R /etc/group)"
  [ -f "$(R /etc/shadow)" ] || { printf 'root:*:19000:0:99999:7:::\n' > "$(R /etc/shadow)"; chmod 0640 "$(R /etc/shadow)"; }
  [ -f "$(R /etc/gshadow)" ] || { printf 'root:*::\n' > "$(R /etc/gshadow)"; chmod 0640 "$(R /etc/gshadow)"; }
}

ensure_user() {
  seed_accounts
  # shellcheck disable=SC2046
  grep -q '^gpio:' "$(R /etc/group)" || { groupadd $(root_args) --system gpio; say "created group gpio"; }
  if ! grep -q "^$SERVICE_USER:" "$(R /etc/passwd)"; then
    # shellcheck disable=SC2046
    useradd $(root_args) --system --user-group --home-dir "$STATE" --no-create-home --shell /usr/sbin/nologin \
      --comment "chair-agent service" --groups gpio "$SERVICE_USER"
    say "created system user $SERVICE_USER (in group gpio)"
  elif ! grep -q "^gpio:.*[:,]$SERVICE_USER\(,\|$\)" "$(R /etc/group)"; then
    # shellcheck disable=SC2046
    usermod $(root_args) -aG gpio "$SERVICE_USER"
    say "added $SERVICE_USER to group gpio"
  fi
  SVC_UID=$(awk -F: -v u="$SERVICE_USER" '$1==u {print $3}' "$(R /etc/passwd)")
  SVC_GID=$(awk -F: -v u="$SERVICE_USER" '$1==u {print $4}' "$(R /etc/passwd)")
}

# The udev rule that gives /dev/gpiochip* to group gpio (systemd/60-chair-agent-gpio.rules), applied
# to the chips present now: without it the service could open no GPIO line until the next boot.
apply_gpio_rule() {
  [ -z "${ROOT:-}" ] && command -v udevadm >/dev/null 2>&1 || return 0
  [ -d /run/udev ] || return 0
  udevadm control --reload-rules >/dev/null 2>&1 || true
  udevadm trigger --settle --subsystem-match=gpio >/dev/null 2>&1 || true
}

ensure_dirs() {
  install -d -m 0750 -o 0 -g "$SVC_GID" "$(R "$ETC")"
  if [ -f "$(R "$ETC/config.yaml")" ]; then
    chown 0:"$SVC_GID" "$(R "$ETC/config.yaml")"
    chmod 0640 "$(R "$ETC/config.yaml")"
  fi
  install -d -m 0700 -o 0 -g 0 "$(R "$CREDENTIALS")"
  for name in $CREDENTIAL_NAMES; do
    f=$(R "$CREDENTIALS/$name")
    [ -f "$f" ] || (umask 077; : > "$f")
    chown 0:0 "$f"
    chmod 0600 "$f"
  done
  install -d -m 0750 -o "$SVC_UID" -g "$SVC_GID" "$(R "$STATE")"
}

# Node's compile cache, in systemd's CacheDirectory: V8's code for the files of the version that
# wrote it, under a directory per Node version. Node never removes an entry, and every build's
# chunks have new names, so each upgrade would leave the last version's code on the SD card for
# good. Emptied on upgrade; the new version writes its own when it first stops.
clear_compile_cache() {
  [ -d "$(R "$CACHE")" ] || return 0
  find "$(R "$CACHE")" -mindepth 1 -delete
}

# The site's config is the site's: created from the example only when there is none, never a
# dpkg conffile (an upgrade with no terminal would stop at the conffile prompt and fail). The
# example of each version is at $APP/app/config/config.example.yaml and in /usr/share/doc.
ensure_config() {
  [ -f "$(R "$ETC/config.yaml")" ] && return 0
  install -d -m 0750 -o 0 -g "$SVC_GID" "$(R "$ETC")"
  install -m 0640 -o 0 -g "$SVC_GID" "$(R "$APP/app/config/config.example.yaml")" "$(R "$ETC/config.yaml")"
  say "wrote $ETC/config.yaml from the example: edit it for this site"
}

systemd_running() { [ -z "${ROOT:-}" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; }

enable_unit() {
  if [ -n "${ROOT:-}" ]; then
    if command -v systemctl >/dev/null 2>&1; then
      systemctl --root="$ROOT" enable "$UNIT_NAME" >/dev/null 2>&1 || say "could not enable $UNIT_NAME in $ROOT"
    else
      # An image built where systemd is not installed: what `systemctl --root enable` would link.
      install -d "$ROOT/etc/systemd/system/multi-user.target.wants"
      ln -sfn "/etc/systemd/system/$UNIT_NAME" "$ROOT/etc/systemd/system/multi-user.target.wants/$UNIT_NAME"
    fi
    return 0
  fi
  if command -v deb-systemd-helper >/dev/null 2>&1; then
    # A removed (not purged) package left the unit masked.
    deb-systemd-helper unmask "$UNIT_NAME" >/dev/null 2>&1 || true
    deb-systemd-helper enable "$UNIT_NAME" >/dev/null 2>&1 || true
  elif command -v systemctl >/dev/null 2>&1; then
    systemctl enable "$UNIT_NAME" >/dev/null 2>&1 || true
  fi
  if systemd_running; then systemctl daemon-reload; fi
}

# The config is valid with the secrets as the service will get them.
config_valid() {
  CREDENTIALS_DIRECTORY="$(R "$CREDENTIALS")" "$(R "$APP")/bin/chair-agent" check --config "$(R "$ETC/config.yaml")" >/dev/null 2>&1
}

# Restarts the service when systemd runs and the config is valid; otherwise says why not.
start_if_valid() {
  if ! systemd_running; then
    say "systemd is not running here: start it later with: systemctl restart $UNIT_NAME"
    return 0
  fi
  if config_valid; then
    systemctl restart "$UNIT_NAME"
    say "chair-agent is running (systemctl status chair-agent)"
  else
    systemctl stop "$UNIT_NAME" >/dev/null 2>&1 || true
    say "not started yet: the config is not complete ($ETC/config.yaml); see: sudo chair-agent check"
  fi
}

next_steps() {
  cat <<TXT

Next:
  1. sudoedit $ETC/config.yaml            site.id, vendor.baseUrl, mqtt.url, the chairs and their pins
  2. sudo chair-agent secrets set vendor-api-key      (and webhook-secret; mqtt-password if the broker needs one)
  3. sudo chair-agent check && sudo chair-agent doctor
  4. sudo chair-agent gpio --blink                    the wiring test: each LED lights, each press is printed
  5. sudo systemctl restart chair-agent; journalctl -u chair-agent -f -o cat
TXT
}
