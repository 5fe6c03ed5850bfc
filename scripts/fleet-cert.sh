#!/usr/bin/env bash
# Certificates for a fleet of site boxes bridged to a central broker (docs/FLEET.md).
#
#   scripts/fleet-cert.sh ca      DIR                 a fleet CA (DIR/ca.key stays offline; DIR/ca.crt goes everywhere)
#   scripts/fleet-cert.sh server  DIR NAME [SAN...]   the central broker's certificate (SAN: DNS:host or IP:addr)
#   scripts/fleet-cert.sh site    DIR SITE_ID         a site's key and certificate (CN = SITE_ID), and the ACL lines
#   scripts/fleet-cert.sh client  DIR NAME            a central consumer's key and certificate (CN = NAME)
#
# The central broker maps the certificate's CN to the user name (use_identity_as_username true),
# so one pattern ACL covers every site: the CN *is* the site id. SITE_ID must be what the site's
# agent has as site.id (a-z, 0-9, '-', '_'), since it is its topic level.
set -euo pipefail

DAYS_CA=3650
DAYS_LEAF=825

die() { echo "fleet-cert: $*" >&2; exit 64; }
command -v openssl >/dev/null || die "openssl is not installed (apt install openssl)"

verb="${1:-}"
dir="${2:-}"
[ -n "$verb" ] && [ -n "$dir" ] || die "usage: $0 ca|server|site|client DIR [NAME] [SAN...]"
mkdir -p "$dir"
umask 077

ca_ready() { [ -f "$dir/ca.key" ] && [ -f "$dir/ca.crt" ] || die "no CA in $dir: run '$0 ca $dir' first"; }

# A key and a certificate signed by the fleet CA. $1 file stem, $2 CN, $3 extensions.
leaf() {
  local stem="$1" cn="$2" ext="$3"
  [ -e "$dir/$stem.key" ] && die "$dir/$stem.key exists; remove it to issue a new one"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$cn" \
    -keyout "$dir/$stem.key" -out "$dir/$stem.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$stem.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
    -days "$DAYS_LEAF" -sha256 -extfile <(printf '%s\n' "$ext") -out "$dir/$stem.crt" 2>/dev/null
  rm -f "$dir/$stem.csr"
  # Mosquitto reads its key after dropping to its own user: the key is for root and the
  # mosquitto group (where this machine has one; install(1) sets it on the broker host).
  chmod 640 "$dir/$stem.key"
  if getent group mosquitto >/dev/null 2>&1; then chgrp mosquitto "$dir/$stem.key" 2>/dev/null || true; fi
  chmod 644 "$dir/$stem.crt"
}

case "$verb" in
  ca)
    [ -e "$dir/ca.key" ] && die "$dir/ca.key exists; a new CA would orphan every certificate it signed"
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$DAYS_CA" -sha256 \
      -subj "/CN=chair-agent fleet CA" -addext "basicConstraints=critical,CA:true" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    chmod 600 "$dir/ca.key"
    chmod 644 "$dir/ca.crt"
    echo "fleet CA: $dir/ca.crt (keep $dir/ca.key offline)"
    ;;
  server)
    ca_ready
    name="${3:-}"
    [ -n "$name" ] || die "usage: $0 server DIR NAME [DNS:host|IP:addr ...]"
    shift 3
    sans=("DNS:$name" "$@")
    san=$(IFS=,; echo "${sans[*]}")
    leaf "$name" "$name" "basicConstraints=CA:false
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=$san"
    echo "central broker: $dir/$name.crt $dir/$name.key (SAN $san)"
    echo "  on the broker: sudo install -o root -g mosquitto -m 0640 $dir/$name.key /etc/mosquitto/certs/ (Mosquitto reads it as its own user)"
    ;;
  site | client)
    ca_ready
    name="${3:-}"
    if [ "$verb" = site ]; then
      [[ "$name" =~ ^[a-z0-9_-]{1,64}$ ]] || die "a site id is what site.id accepts: a-z, 0-9, '_' or '-' (at most 64): got '${name}'"
    else
      [[ "$name" =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ ]] || die "name must be letters, digits, '.', '_' or '-' (at most 64): got '${name}'"
    fi
    leaf "$name" "$name" "basicConstraints=CA:false
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
    if [ "$verb" = site ]; then
      echo "site $name: $dir/$name.crt $dir/$name.key (copy both and ca.crt to the site box, /etc/mosquitto/certs/)"
      echo "  on the site box: sudo install -o root -g mosquitto -m 0640 $name.key /etc/mosquitto/certs/ (Mosquitto reads it as its own user)"
      echo "central ACL: covered by the fleet's pattern lines (docs/FLEET.md); nothing per site:"
      echo "  pattern write chair-agent/%u/#"
      echo "  pattern read chair-agent/%u/chairs/+/start"
      echo "  pattern read chair-agent/%u/bridge/request/#"
    else
      echo "consumer $name: $dir/$name.crt $dir/$name.key; give it a user block in the central ACL (docs/FLEET.md)"
    fi
    ;;
  *) die "unknown verb '$verb': ca, server, site or client" ;;
esac
