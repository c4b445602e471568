#!/usr/bin/env bash
# Installs wirevault with its man pages and shell completions (generated
# from the clap definitions by the hidden `wirevault generate-docs DIR`):
#   $PREFIX/bin/wirevault
#   $PREFIX/share/man/man1/wirevault.1, wirevault-record.1, ... (one per subcommand)
#   $PREFIX/share/bash-completion/completions/wirevault
#   $PREFIX/share/zsh/site-functions/_wirevault
#   $PREFIX/share/fish/vendor_completions.d/wirevault.fish
# With --service, also what the systemd service needs (packaging/):
#   $UNITDIR/wirevault.service         the unit, its paths set to this install
#   $SYSUSERSDIR/wirevault.conf        the service user, for systemd-sysusers
#   the user and group wirevault        created if missing (home /var/lib/wirevault)
#   $SYSCONFDIR/wirevault/wirevault.toml  the config; one that is there is never
#                                     replaced: if it differs, the packaged one
#                                     goes beside it as wirevault.toml.new
# UNITDIR and SYSUSERSDIR are $PREFIX/lib/{systemd/system,sysusers.d} for the
# prefixes systemd searches (/usr/local, /usr), else /etc/...; SYSCONFDIR is /etc.
#
# Usage: scripts/install.sh [--service] [--binary FILE]
#   --binary FILE  install FILE instead of building target/release/wirevault
# PREFIX defaults to /usr/local; DESTDIR is honoured (packaging, a scratch
# root: the user is then created in DESTDIR/etc/passwd). A file whose bytes
# and mode are already in place is left alone: a second run changes nothing
# and says so. Needs write access to the directories.
set -euo pipefail
cd "$(dirname "$0")/.."

service=false
bin=
while (($#)); do
    case $1 in
        --service) service=true ;;
        --binary)
            bin=${2:?--binary needs a file}
            shift
            ;;
        -h | --help)
            sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"
            exit 0
            ;;
        *)
            echo "install: unknown option $1 (see scripts/install.sh --help)" >&2
            exit 2
            ;;
    esac
    shift
done

prefix=${PREFIX:-/usr/local}
dest=${DESTDIR:-}
sysconfdir=${SYSCONFDIR:-/etc}
case $prefix in
    /usr | /usr/local) lib=$prefix/lib ;;
    *) lib=/etc ;;
esac
unitdir=${UNITDIR:-$lib/systemd/system}
sysusersdir=${SYSUSERSDIR:-$lib/sysusers.d}
config=$sysconfdir/wirevault/wirevault.toml

if [[ -z $bin ]]; then
    cargo build --release -q -p wirevault
    bin=target/release/wirevault
fi
gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT
"$bin" generate-docs "$gen" --config-file "$config" --unit-file "$unitdir/wirevault.service"

changed=0
# put MODE SRC DEST: installs SRC as DEST unless DEST has its bytes and mode already.
put() {
    local mode=$1 src=$2 dst=$3 what=installed
    if [[ -f $dst ]]; then
        if cmp -s "$src" "$dst" && [[ $(stat -c %a "$dst") == "${mode#0}" ]]; then
            return 0
        fi
        what=updated
    fi
    install -D -m "$mode" "$src" "$dst"
    echo "install: $what $dst" >&2
    changed=$((changed + 1))
}

put 0755 "$bin" "$dest$prefix/bin/wirevault"
before=$changed
for page in "$gen"/man/*.1; do
    put 0644 "$page" "$dest$prefix/share/man/man1/$(basename "$page")"
done
if [[ -z $dest && $changed -gt $before ]] && command -v mandb >/dev/null; then
    mandb -q "$prefix/share/man" 2>/dev/null || true
fi
put 0644 "$gen/completions/wirevault.bash" "$dest$prefix/share/bash-completion/completions/wirevault"
put 0644 "$gen/completions/_wirevault" "$dest$prefix/share/zsh/site-functions/_wirevault"
put 0644 "$gen/completions/wirevault.fish" "$dest$prefix/share/fish/vendor_completions.d/wirevault.fish"

if $service; then
    # The unit names the binary and the config where this install puts them.
    sed -e "s#/usr/local/bin/wirevault#$prefix/bin/wirevault#g" \
        -e "s#/etc/wirevault/wirevault.toml#$config#g" packaging/wirevault.service >"$gen/wirevault.service"
    before=$changed
    put 0644 "$gen/wirevault.service" "$dest$unitdir/wirevault.service"
    unit_changed=$((changed - before))
    put 0644 packaging/wirevault.sysusers "$dest$sysusersdir/wirevault.conf"

    # The user: systemd-sysusers (also into a scratch root), else useradd.
    if [[ -n $dest ]]; then
        has_user() { grep -q '^wirevault:' "$dest/etc/passwd" 2>/dev/null; }
    else
        has_user() { getent passwd wirevault >/dev/null; }
    fi
    if ! has_user; then
        if command -v systemd-sysusers >/dev/null; then
            mkdir -p "$dest/etc"
            systemd-sysusers ${dest:+--root="$dest"} "$dest$sysusersdir/wirevault.conf"
        elif [[ -z $dest ]]; then
            nologin=$(command -v nologin || echo /usr/sbin/nologin)
            useradd --system --user-group --home-dir /var/lib/wirevault --no-create-home \
                --shell "$nologin" --comment "wirevault traffic recorder" wirevault
        else
            echo "install: no systemd-sysusers to create the user wirevault in $dest; $sysusersdir/wirevault.conf says what it is" >&2
        fi
        if has_user; then
            echo "install: created the user and group wirevault" >&2
            changed=$((changed + 1))
        fi
    fi

    # The config is the admin's: never replaced.
    fresh=false
    [[ -e $dest$config ]] || fresh=true
    if $fresh || cmp -s packaging/wirevault.toml "$dest$config"; then
        put 0644 packaging/wirevault.toml "$dest$config"
    else
        put 0644 packaging/wirevault.toml "$dest$config.new"
        echo "install: kept $config (it differs from the packaged one, which is $config.new)" >&2
    fi

    if [[ $unitdir != /etc/systemd/system && -e $dest/etc/systemd/system/wirevault.service ]]; then
        echo "install: /etc/systemd/system/wirevault.service overrides $unitdir/wirevault.service;" \
            "remove it to use the installed unit (changes belong in systemctl edit wirevault)" >&2
    fi
    if [[ -z $dest && $unit_changed -gt 0 && -d /run/systemd/system ]]; then
        systemctl daemon-reload
    fi
fi

if ((changed == 0)); then
    echo "install: nothing changed: wirevault is installed in $dest$prefix" >&2
else
    echo "install: $changed change(s) made; running it again changes nothing" >&2
fi
if $service && $fresh; then
    echo "install: then set interface (and max-size) in $config and run: systemctl enable --now wirevault" >&2
fi
